// The READs one JavaScript environment (the main thread or a worker) has running, so that the
// environment's teardown waits until their threads are done with it. Node 20 frees an
// environment's thread-safe functions when it ends, whether or not a thread still holds one, and
// the buffers a READ writes into may end with it: a thread that settled its promise after that
// would write into freed memory. The cleanup hook aborts every read of the environment, then waits
// for each thread to stop touching it; a thread that ends after the teardown started settles
// nothing and frees its job itself.
#pragma once

#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>

namespace tlnixl {

class EnvReads {
 public:
  using AbortFlag = std::shared_ptr<std::atomic<bool>>;

  /** Registers the environment's cleanup hook; the addon's Init calls it once per environment. */
  static void Install(Napi::Env env);

  /** The reads of `env` (Install ran in it). */
  static EnvReads& Of(Napi::Env env);

  /** Counts a read as running until end() or forget(); on the environment's thread. */
  void add(const AbortFlag& aborted);

  /** Forgets a read whose thread never started; on the environment's thread. */
  void forget(const AbortFlag& aborted);

  /**
   * From the read's thread, when it is finished: forgets the read and, unless the environment is
   * being torn down, calls `handOver` (which queues the settlement on the environment's thread);
   * both under the lock the teardown takes, so the environment cannot end in between. Returns
   * what `handOver` returned, or false when the environment is gone.
   */
  template <typename F>
  bool end(const AbortFlag& aborted, F&& handOver) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(aborted);
    idle_.notify_all();
    return !gone_ && handOver();
  }

 private:
  static void TearDown(void* self);

  std::mutex mutex_;
  std::condition_variable idle_;
  std::set<AbortFlag> running_;
  bool gone_ = false;
};

}  // namespace tlnixl
