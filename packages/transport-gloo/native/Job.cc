#include "Job.h"

#include "JobThreads.h"

#include <gloo/common/error.h>

#include <algorithm>
#include <functional>
#include <string>
#include <system_error>

namespace tensorlane::gloo {

namespace {

Failure classify(const std::exception& e) {
  const std::string what = e.what();
  // gloo reports every failure as IoException; its timeouts say "Timed out" or "timeout".
  const bool timedOut = what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos;
  return Failure(timedOut ? FailureCode::Timeout : FailureCode::Io, what);
}

}  // namespace

Job::Job(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout)
    : retired_(Napi::Promise::Deferred::New(env)),
      group_(std::move(group)),
      memory_(std::move(memory)),
      deadline_(std::chrono::steady_clock::now() + timeout) {}

Napi::Object Job::start(Napi::Env env) {
  auto self = shared_from_this();
  std::weak_ptr<Job> weak = self;
  std::function<void()> teardown;
  if (interruptible()) {
    teardown = [weak] {
      if (auto job = weak.lock()) job->abort();
    };
  }
  settler_ = Settler::create(env, std::move(teardown));
  group_->attach(self);
  attempt(&Job::post);
  try {
    JobThreads::run([self] { self->execute(); });
  } catch (const std::system_error& error) {
    settler_->cancel();
    group_->detach(this);
    // What post() handed to gloo stays posted, with no thread to wait for it.
    group_->markBroken(std::string("no thread could be started for an operation: ") + error.what());
    throw Failure(FailureCode::System, std::string("cannot start a thread for the gloo operation: ") + error.what());
  }
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", settler_->promise());
  handle.Set("retired", retired_.Promise());
  handle.Set("abort", Napi::Function::New(env, [self](const Napi::CallbackInfo& info) {
               self->abort();
               // An aborted job may linger in an uninterruptible gloo call: it must not keep the
               // process (or worker) alive for that.
               self->settler_->unref(info.Env());
             }));
  return handle;
}

void Job::abort() {
  {
    // Under the lock: the job's thread destroys its buffers under it too.
    std::lock_guard<std::mutex> lock(mutex_);
    // A finished job has nothing left to end (and a collective nothing left to break).
    if (aborted_ || finished_) return;
    aborted_ = true;
    // A flag set before the wait starts still ends it: gloo checks it on entry.
    for (auto& t : tracked_) {
      if (t.done) continue;
      if (t.direction == Direction::Send) t.buffer->abortWaitSend();
      else t.buffer->abortWaitRecv();
    }
  }
  onAbort();
}

bool Job::aborted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

::gloo::transport::UnboundBuffer& Job::track(std::unique_ptr<::gloo::transport::UnboundBuffer> buffer, Direction direction, int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) throw Failure(FailureCode::Aborted, "aborted");
  tracked_.push_back(Tracked{std::move(buffer), direction, peer, false});
  return *tracked_.back().buffer;
}

void Job::own(std::shared_ptr<void> memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  owned_.push_back(std::move(memory));
}

std::chrono::milliseconds Job::remaining() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

void Job::waitAll() {
  for (size_t i = 0;; i++) {
    ::gloo::transport::UnboundBuffer* buffer;
    Direction direction;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (i < tracked_.size() && tracked_[i].done) i++;
      if (i == tracked_.size()) return;
      buffer = tracked_[i].buffer.get();
      direction = tracked_[i].direction;
    }
    const bool completed = direction == Direction::Send ? buffer->waitSend(remaining()) : buffer->waitRecv(remaining());
    if (!completed) throw Failure(FailureCode::Aborted, "aborted");
    std::lock_guard<std::mutex> lock(mutex_);
    tracked_[i].done = true;
  }
}

void Job::attempt(void (Job::*step)()) {
  try {
    (this->*step)();
  } catch (const Failure& f) {
    failure_ = f;
    // A peer that announces other data than agreed leaves unmatched messages on the pair.
    if (f.code() == FailureCode::Protocol) group_->markBroken(f.what());
  } catch (const std::exception& e) {
    // Closing the group ends gloo's waits with an I/O error: that is not what happened.
    failure_ = group_->closed() ? Failure(FailureCode::Closed, "the group was destroyed") : classify(e);
    group_->markBroken(failure_->what());
  }
}

void Job::execute() {
  if (!failure_.has_value()) attempt(&Job::run);
  std::vector<GroupState::Posted> posted;
  std::vector<std::shared_ptr<void>> owned;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& t : tracked_) {
      if (!t.done) posted.push_back(GroupState::Posted{std::move(t.buffer), t.peer});
    }
    // Those gloo is done with go now: its buffer destructor waits until the device thread let go.
    tracked_.clear();
    owned.swap(owned_);
    finished_ = true;
  }
  size_t pinnedBytes = 0;
  for (const auto& m : memory_) {
    const bool used = std::any_of(posted.begin(), posted.end(), [&m](const GroupState::Posted& p) {
      return static_cast<const char*>(p.buffer->ptr) >= m.data() && static_cast<const char*>(p.buffer->ptr) < m.data() + m.size();
    });
    if (used) pinnedBytes += m.size();
  }
  // Read by settle(), which the call below hands over to the JS thread.
  memoryPosted_ = pinnedBytes > 0;
  auto self = shared_from_this();
  const bool handedOver =
      settler_->finish([self](Napi::Env env, Napi::Promise::Deferred& deferred) { self->settle(env, deferred); }, memoryPosted_);
  if (posted.empty()) return;
  // Queued behind settle() on the JS thread, whenever the group lets go.
  std::function<void()> released;
  if (memoryPosted_ && handedOver) released = [self] { self->releaseMemory(); };
  group_->retire(std::move(posted), std::move(owned), pinnedBytes, std::move(released));
}

void Job::settle(Napi::Env env, Napi::Promise::Deferred& deferred) {
  group_->detach(this);
  if (memoryPosted_) {
    // Kept until the group lets go: that must not keep the thread's event loop alive.
    settler_->unref(env);
  } else {
    for (auto& m : memory_) m.release();
    memory_.clear();
    retired_.Resolve(env.Undefined());
  }
  if (failure_.has_value()) deferred.Reject(failure_->toError(env).Value());
  else deferred.Resolve(env.Undefined());
}

void Job::releaseMemory() {
  auto self = shared_from_this();
  // Refused once the job's environment is gone: its references then stay, as PinnedBytes says.
  settler_->post([self](Napi::Env env) {
    for (auto& m : self->memory_) m.release();
    self->memory_.clear();
    self->retired_.Resolve(env.Undefined());
  });
}

}  // namespace tensorlane::gloo
