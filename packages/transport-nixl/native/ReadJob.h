// One fetch running on its own native thread: register the destinations (unless already inside a
// registered region), load the producer's metadata, post the READ and poll it to completion, then
// settle a JS promise. Polling off the JS thread keeps the consumer's event loop free; the
// producer does nothing (its NIXL progress thread answers).
//
// Ownership: the JS thread creates the job; its thread runs it and, once the READ is over, hands it
// back to the JS thread, which settles the promise, releases the thread-safe function and deletes
// the job. After the hand-over the thread touches nothing of the job: the job may already be gone.
#pragma once

#include "EnvReads.h"
#include "Failure.h"
#include "ReadPlan.h"

#include <napi.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tlnixl {

class ReadJob {
 public:
  /**
   * Starts the thread. `keep` holds the destination buffers: the job owns a reference to them
   * until NIXL can no longer write into them, whatever the JS side does after an abort.
   */
  static Napi::Object Start(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep);

 private:
  ReadJob(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep);
  void run();
  void execute();
  /** Posts one request and polls it; returns when it completed, failed or was aborted and released. */
  void transfer(nixl_capi_agent_t agent, size_t first, size_t count);
  /** On the JS thread, once the thread handed the job over: settles, releases, deletes. */
  static void finish(Napi::Env env, Napi::Function, ReadJob* job);

  std::unique_ptr<ReadPlan> plan_;
  Napi::Promise::Deferred deferred_;
  Napi::Reference<Napi::Value> keep_;
  Napi::ThreadSafeFunction done_;
  EnvReads& reads_;
  EnvReads::AbortFlag aborted_;
  std::optional<Failure> failure_;
};

}  // namespace tlnixl
