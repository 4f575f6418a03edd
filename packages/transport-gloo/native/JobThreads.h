#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace tensorlane::gloo {

// The threads that run the addon's jobs, kept once idle for the next job. A thread made for each
// job and ended after it left every transfer about half again as slow here (64 MiB over loopback
// TCP: 19.5 ms against 13 when the same thread runs the next job, or when each thread lives on a
// while after its job; NIXL's shared-memory READs showed no such difference), so a thread waits for
// the next job instead of ending.
class JobThreads {
 public:
  // Runs `task` on an idle thread, or on a new one when every thread is busy: a job blocks for as
  // long as its transfer takes, so there are never fewer threads than running jobs (a job never
  // waits for another to finish). Throws std::system_error when no thread can be made.
  static void run(std::function<void()> task);

 private:
  // Idle threads beyond this many end: a burst of jobs leaves no crowd behind.
  static constexpr std::size_t kIdleKept = 16;

  static JobThreads& instance();
  void submit(std::function<void()> task);
  void serve();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  // Threads waiting for a job: a job is queued for one of them, or a thread is made for it.
  std::size_t idle_ = 0;
};

}  // namespace tensorlane::gloo
