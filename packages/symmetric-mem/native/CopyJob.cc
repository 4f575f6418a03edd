#include "CopyJob.h"

#include <cstring>

namespace tensorlane::symmetric {

CopyJob::CopyJob(Napi::Env env, uint8_t* target, const uint8_t* source, size_t length, Napi::Value keep,
                 std::shared_ptr<Segment> keepSegment)
    : Napi::AsyncWorker(env, "tensorlane.symmetric.copy"),
      target_(target),
      source_(source),
      length_(length),
      deferred_(Napi::Promise::Deferred::New(env)),
      keep_(Napi::Persistent(keep)),
      keepSegment_(std::move(keepSegment)) {}

Napi::Promise CopyJob::Start(Napi::Env env, uint8_t* target, const uint8_t* source, size_t length, Napi::Value keep,
                             std::shared_ptr<Segment> keepSegment) {
  if (length <= kInlineBytes) {
    std::memcpy(target, source, length);
    Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env);
    done.Resolve(env.Undefined());
    return done.Promise();
  }
  auto* job = new CopyJob(env, target, source, length, keep, std::move(keepSegment));
  Napi::Promise promise = job->deferred_.Promise();
  job->Queue();
  return promise;
}

void CopyJob::Execute() { std::memcpy(target_, source_, length_); }

void CopyJob::OnOK() { deferred_.Resolve(Env().Undefined()); }

void CopyJob::OnError(const Napi::Error& error) { deferred_.Reject(error.Value()); }

}  // namespace tensorlane::symmetric
