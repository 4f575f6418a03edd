#include "CopyJob.h"

#include "BusGuard.h"

#include <tensorlane/Failure.h>

#include <cstring>

namespace tensorlane::symmetric {

namespace {

Failure cutShort(size_t length) {
  return Failure(FailureCode::Protocol, "the producer's shared-memory segment shrank under a read of " + std::to_string(length) +
                                            " bytes (a broken or hostile producer, or another process of its user): the read stopped partway, and what it wrote is not the object");
}

/** A copy out of a peer's segment runs guarded; one from this process's own memory runs as is. */
bool copy(uint8_t* target, const uint8_t* source, size_t length, bool fromPeer) {
  if (fromPeer) return copyGuarded(target, source, length);
  std::memcpy(target, source, length);
  return true;
}

}  // namespace

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
    if (!copy(target, source, length, keepSegment != nullptr)) throw cutShort(length);
    Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env);
    done.Resolve(env.Undefined());
    return done.Promise();
  }
  auto* job = new CopyJob(env, target, source, length, keep, std::move(keepSegment));
  Napi::Promise promise = job->deferred_.Promise();
  job->Queue();
  return promise;
}

void CopyJob::Execute() {
  if (copy(target_, source_, length_, keepSegment_ != nullptr)) return;
  cut_ = true;
  SetError(cutShort(length_).what());
}

void CopyJob::OnOK() { deferred_.Resolve(Env().Undefined()); }

void CopyJob::OnError(const Napi::Error& error) { deferred_.Reject(cut_ ? cutShort(length_).toError(Env()).Value() : error.Value()); }

}  // namespace tensorlane::symmetric
