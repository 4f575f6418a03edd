#include "JobThreads.h"

#include <thread>
#include <utility>

namespace tensorlane::gloo {

void JobThreads::run(std::function<void()> task) {
  instance().submit(std::move(task));
}

JobThreads& JobThreads::instance() {
  // Never destroyed: idle threads wait on it until the process ends.
  static JobThreads* threads = new JobThreads();
  return *threads;
}

void JobThreads::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(std::move(task));
  if (queue_.size() <= idle_) {
    wake_.notify_one();
    return;
  }
  try {
    std::thread([this] { serve(); }).detach();
  } catch (...) {
    queue_.pop_back();
    throw;
  }
}

void JobThreads::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    while (!queue_.empty()) {
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      // What the task holds (its job) goes now, not when the thread takes its next task.
      task = nullptr;
      lock.lock();
    }
    if (idle_ >= kIdleKept) return;
    idle_++;
    wake_.wait(lock, [this] { return !queue_.empty(); });
    idle_--;
  }
}

}  // namespace tensorlane::gloo
