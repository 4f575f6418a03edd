// One fetch running on its own native thread: register the destinations (unless already inside a
// registered region), load the producer's metadata, post the READ and poll it to completion, then
// settle a JS promise. Polling off the JS thread keeps the consumer's event loop free; the
// producer does nothing (its NIXL progress thread answers).
#pragma once

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
  void settle(Napi::Env env);

  std::unique_ptr<ReadPlan> plan_;
  Napi::Promise::Deferred deferred_;
  Napi::Reference<Napi::Value> keep_;
  Napi::ThreadSafeFunction done_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  std::optional<Failure> failure_;
};

}  // namespace tlnixl
