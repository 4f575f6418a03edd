// One fetch running on its own native thread: register the destinations (unless already inside a
// registered region), load the producer's metadata, post the READ and poll it to completion, then
// settle a JS promise. Polling off the JS thread keeps the consumer's event loop free; the
// producer does nothing (its NIXL progress thread answers).
//
// Ownership: the JS thread creates the job; its thread runs it and, once the READ is over, hands it
// back to the JS thread (the kit's Settler), which settles the promise and deletes the job. After
// the hand-over the thread touches nothing of the job: the job may already be gone. The teardown of
// the job's environment aborts the READ and waits for it, since NIXL writes into the environment's
// buffers.
#pragma once

#include "ReadPlan.h"

#include <tensorlane/Settler.h>

#include <napi.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tensorlane::nixl {

class ReadJob {
 public:
  /**
   * Starts the thread. `keep` holds the destination buffers: the job owns a reference to them
   * until NIXL can no longer write into them, whatever the JS side does after an abort.
   */
  static Napi::Object Start(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep);

 private:
  ReadJob(std::unique_ptr<ReadPlan> plan, Napi::Value keep);
  void run();
  void execute();
  /** Posts one request and polls it; returns when it completed, failed or was aborted and released. */
  void transfer(nixl_capi_agent_t agent, size_t first, size_t count);
  /** On the JS thread, once the thread handed the job over: settles, then deletes the job. */
  void settle(Napi::Env env, Napi::Promise::Deferred& deferred);

  std::unique_ptr<ReadPlan> plan_;
  Napi::Reference<Napi::Value> keep_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  std::shared_ptr<Settler> settler_;
  std::optional<Failure> failure_;
};

}  // namespace tensorlane::nixl
