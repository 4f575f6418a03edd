// One memcpy on a libuv worker thread, settling a promise: a transport's copy of many megabytes
// must not block the transfer agent's event loop (small copies run inline). The job holds references to both typed arrays
// (and through them to their memory) until the copy is done.
#pragma once

#include "Segment.h"

#include <napi.h>

#include <memory>

namespace tensorlane::symmetric {

class CopyJob : public Napi::AsyncWorker {
 public:
  /** Copies up to this size run at once on the calling thread: cheaper than two thread hops. */
  static constexpr size_t kInlineBytes = 256 * 1024;

  /**
   * Copies `length` bytes; `source` may lie in a peer's segment (kept alive by `keepSegment`), which
   * its producer can shrink under the copy: the promise then rejects with a Protocol failure
   * instead of the process dying of SIGBUS (BusGuard).
   */
  static Napi::Promise Start(Napi::Env env, uint8_t* target, const uint8_t* source, size_t length, Napi::Value keep,
                             std::shared_ptr<Segment> keepSegment);

  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& error) override;

 private:
  CopyJob(Napi::Env env, uint8_t* target, const uint8_t* source, size_t length, Napi::Value keep, std::shared_ptr<Segment> keepSegment);

  uint8_t* target_;
  const uint8_t* source_;
  size_t length_;
  Napi::Promise::Deferred deferred_;
  Napi::Reference<Napi::Value> keep_;
  std::shared_ptr<Segment> keepSegment_;
  bool cut_ = false;
};

}  // namespace tensorlane::symmetric
