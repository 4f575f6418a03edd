// One fetch: register the destinations (unless already inside a registered region), load the
// producer's metadata, post the READ and poll it to completion, then settle a JS promise. The
// producer does nothing (its NIXL progress thread answers).
//
// A READ from the same host completes inside its post (UCX's cma copies there): the JS thread that
// asks registers the destinations of one of at most AgentConfig::readHereBytes, posts it itself and
// settles at once, sparing a thread's start and the hand-back, two wake-ups of a busy machine.
// Whatever would wait or connect goes on on a native thread of its own, which polls, keeping the
// consumer's event loop free: a larger READ, the first from a producer (loading its metadata
// connects), one from a producer that another READ is reading from (updating its metadata could
// wait for that READ), a post left in progress (across hosts).
//
// Ownership: the JS thread creates the job; its thread runs it and, once the READ is over, hands it
// back to the JS thread (the kit's Settler), which settles the promise and deletes the job. After
// the hand-over the thread touches nothing of the job: the job may already be gone. The teardown of
// the job's environment aborts the READ and waits for it, since NIXL writes into the environment's
// buffers.
#pragma once

#include "NixlCapi.h"
#include "ReadPlan.h"
#include "RegionTable.h"

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
   * Runs the read, here as far as it completes without waiting, then on a thread. `keep` holds the
   * destination buffers: the job owns a reference to them until NIXL can no longer write into
   * them, whatever the JS side does after an abort.
   */
  static Napi::Object Start(Napi::Env env, std::unique_ptr<ReadPlan> plan, Napi::Value keep);

  ~ReadJob();

 private:
  struct Request;

  ReadJob(std::unique_ptr<ReadPlan> plan, Napi::Value keep);
  /** The thread's part: the rest of the read, then the hand-over. */
  void run();
  /**
   * Registers, begins and posts the requests in turn; with `mayWait`, to the end, polling each,
   * else up to the first step that would wait. True once every request completed; throws a Failure.
   */
  bool advance(bool mayWait);
  /** Posts the request of the spans [first, first + count) (one pair of memory kinds). */
  std::unique_ptr<Request> post(nixl_capi_agent_t agent, size_t first, size_t count);
  /** Polls `request` until it completes, fails or is aborted and released (its status then says which). */
  void await(Request& request);
  /** On the JS thread, when the read cannot go on on a thread: aborts what was posted, waits for it, ends. */
  void abandon();
  /** Once the read is over, whatever happened: ends the transfer and drops the destinations' registrations. */
  void end();
  /** On the JS thread: settles with the read's outcome and lets the buffers go. */
  void settle(Napi::Env env, Napi::Promise::Deferred& deferred);

  std::unique_ptr<ReadPlan> plan_;
  Napi::Reference<Napi::Value> keep_;
  std::shared_ptr<std::atomic<bool>> aborted_;
  std::shared_ptr<Settler> settler_;
  std::optional<Failure> failure_;
  /** Destination registrations this read holds (free when a pool or pinned registration holds them). */
  std::vector<RegionTable::Key> acquired_;
  bool registered_ = false;
  bool begun_ = false;
  /** The first span not posted yet, and the request posted last while it is in progress. */
  size_t next_ = 0;
  std::unique_ptr<Request> current_;
};

}  // namespace tensorlane::nixl
