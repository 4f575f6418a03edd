#pragma once

#include "GroupState.h"
#include "PinnedBytes.h"

#include <tensorlane/Settler.h>

#include <napi.h>

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace tensorlane::gloo {

// One blocking operation of a group (connect, send, receive, a collective), run on one of the
// addon's job threads (JobThreads.h): a long gloo wait must never hold the JS thread nor one of
// libuv's few pool threads. Its promise settles on the JS thread through the kit's Settler.
class Job : public std::enable_shared_from_this<Job> {
 public:
  Job(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout);
  virtual ~Job() = default;

  // JS thread: hands the job to a thread and returns { promise, retired, abort } for JS. `retired`
  // settles once gloo no longer touches the job's memory: when the job settles, or for buffers it
  // left posted, once the group retired them (GroupState::retire).
  Napi::Object start(Napi::Env env);

  // Any thread: ends the job's waits (gloo's abortWaitSend/abortWaitRecv); it then fails as aborted.
  void abort();

 protected:
  enum class Direction { Send, Recv };

  // On the thread that starts the job, before a job thread takes it: what it posts goes out at once,
  // not after a thread wakes (on this VM about 0.3 ms that a receive's sender would wait for).
  virtual void post() {}
  virtual void run() = 0;
  // Called once by abort(), for jobs whose gloo calls cannot be interrupted.
  virtual void onAbort() {}
  // Whether abort() ends the job at once (a pair's waits end; a collective's or a connect's gloo
  // calls go on until their timeout or until the group closes). The teardown of the job's
  // environment aborts such jobs and waits for them, since gloo writes into the environment's
  // memory; it cannot wait out a gloo timeout for the others, whose memory is safe once their group
  // closes (its owner's finalizer closes it with the environment).
  virtual bool interruptible() const { return false; }

  GroupState& group() const { return *group_; }
  const std::vector<PinnedBytes>& memory() const { return memory_; }

  // Registers a buffer before the caller posts it to the pair with `peer`, so that abort() reaches
  // its wait and an aborted job retires it; Failure(Aborted) instead once the job is aborted.
  ::gloo::transport::UnboundBuffer& track(std::unique_ptr<::gloo::transport::UnboundBuffer> buffer, Direction direction, int peer);
  // Memory of the job's own that tracked buffers point into (kept as long as they are).
  void own(std::shared_ptr<void> memory);
  // Waits for every tracked buffer not yet waited for; Failure(Aborted) when aborted.
  void waitAll();
  bool aborted();
  // Time left before the job's gloo timeout (at least 1 ms: gloo reads 0 as "no timeout").
  std::chrono::milliseconds remaining() const;

 private:
  struct Tracked {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    Direction direction;
    int peer;
    bool done;
  };

  // Runs one step of the job, keeping its failure for settle().
  void attempt(void (Job::*step)());
  void execute();
  void settle(Napi::Env env, Napi::Promise::Deferred& deferred);
  // Any thread, once the group let go of what the job left posted: releases its memory on its own
  // JS thread and settles `retired`.
  void releaseMemory();

  Napi::Promise::Deferred retired_;
  std::shared_ptr<Settler> settler_;
  std::shared_ptr<GroupState> group_;
  std::vector<PinnedBytes> memory_;
  const std::chrono::steady_clock::time_point deadline_;

  std::mutex mutex_;
  bool aborted_ = false;
  bool finished_ = false;
  // Declared before the buffers that point into it: members are destroyed in reverse order, so a job
  // destroyed with buffers still posted lets go of them before their memory.
  std::vector<std::shared_ptr<void>> owned_;
  std::vector<Tracked> tracked_;

  // Written by the starting thread (post) and then the job's thread, before it hands over to the JS thread.
  std::optional<Failure> failure_;
  bool memoryPosted_ = false;
};

}  // namespace tensorlane::gloo
