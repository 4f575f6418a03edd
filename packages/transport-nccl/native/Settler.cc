#include "Settler.h"

namespace tlnccl {

Settler::Settler(Napi::Env env) : deferred_(Napi::Promise::Deferred::New(env)) {
  tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function(), "tensorlane-nccl", 0, 1);
}

std::shared_ptr<Settler> Settler::create(Napi::Env env) { return std::shared_ptr<Settler>(new Settler(env)); }

void Settler::resolve(std::optional<uint64_t> value) {
  value_ = value;
  settle();
}

void Settler::reject(const Failure& failure) {
  failure_ = failure;
  settle();
}

void Settler::settle() {
  auto self = shared_from_this();
  tsfn_.BlockingCall([self](Napi::Env env, Napi::Function) {
    if (self->failure_.has_value()) self->deferred_.Reject(self->failure_->toError(env).Value());
    else if (self->value_.has_value()) self->deferred_.Resolve(Napi::BigInt::New(env, *self->value_));
    else self->deferred_.Resolve(env.Undefined());
  });
  tsfn_.Release();
}

}  // namespace tlnccl
