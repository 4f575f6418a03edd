#include "Job.h"

#include "JobThreads.h"

#include <gloo/common/error.h>

#include <algorithm>
#include <string>

namespace tlgloo {

namespace {

Failure classify(const std::exception& e) {
  const std::string what = e.what();
  // gloo reports every failure as IoException; its timeouts say "Timed out" or "timeout".
  const bool timedOut = what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos;
  return Failure(timedOut ? Failure::Kind::Timeout : Failure::Kind::Io, what);
}

}  // namespace

Job::Job(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout)
    : deferred_(Napi::Promise::Deferred::New(env)),
      group_(std::move(group)),
      memory_(std::move(memory)),
      deadline_(std::chrono::steady_clock::now() + timeout) {}

Napi::Object Job::start(Napi::Env env) {
  tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function(), "tensorlane-gloo", 0, 1);
  auto self = shared_from_this();
  group_->attach(self);
  attempt(&Job::post);
  JobThreads::run([self] { self->execute(); });
  Napi::Object handle = Napi::Object::New(env);
  handle.Set("promise", promise());
  handle.Set("abort", Napi::Function::New(env, [self](const Napi::CallbackInfo& info) {
               self->abort();
               // An aborted job may linger in an uninterruptible gloo call: it must not keep the
               // process (or worker) alive for that.
               self->tsfn_.Unref(info.Env());
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

gloo::transport::UnboundBuffer& Job::track(std::unique_ptr<gloo::transport::UnboundBuffer> buffer, Direction direction) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) throw Failure(Failure::Kind::Aborted, "aborted");
  tracked_.push_back(Tracked{std::move(buffer), direction, false});
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
    gloo::transport::UnboundBuffer* buffer;
    Direction direction;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (i < tracked_.size() && tracked_[i].done) i++;
      if (i == tracked_.size()) return;
      buffer = tracked_[i].buffer.get();
      direction = tracked_[i].direction;
    }
    const bool completed = direction == Direction::Send ? buffer->waitSend(remaining()) : buffer->waitRecv(remaining());
    if (!completed) throw Failure(Failure::Kind::Aborted, "aborted");
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
    if (f.kind() == Failure::Kind::Protocol) group_->markBroken(f.what());
  } catch (const std::exception& e) {
    failure_ = classify(e);
    group_->markBroken(failure_->what());
  }
}

void Job::execute() {
  if (!failure_.has_value()) attempt(&Job::run);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> buffers;
  std::vector<std::shared_ptr<void>> owned;
  bool incomplete;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incomplete = std::any_of(tracked_.begin(), tracked_.end(), [](const Tracked& t) { return !t.done; });
    for (auto& t : tracked_) buffers.push_back(std::move(t.buffer));
    tracked_.clear();
    owned.swap(owned_);
    finished_ = true;
  }
  if (incomplete) memoryRetired_ = group_->retire(buffers, owned);
  // Whatever is left is done with (or its pairs are closed): gloo's buffer destructor waits until
  // the device thread has let go of it, so its memory is free to release afterwards.
  buffers.clear();
  owned.clear();
  auto self = shared_from_this();
  tsfn_.BlockingCall([self](Napi::Env env, Napi::Function) { self->settle(env); });
  tsfn_.Release();
}

void Job::settle(Napi::Env env) {
  group_->detach(this);
  // An unfinished job's buffers stay posted until the group closes, so their memory must outlive
  // them: the owner's environment hands it to the group (released at close). Memory pinned in another
  // environment (a main thread receiving through a published group) cannot be released from the
  // owner's thread: it stays pinned for the life of the process (core quarantines it as well).
  const bool kept = memoryRetired_ && (!group_->ownedBy(env) || group_->retirePinned(memory_));
  if (!kept) {
    for (auto& m : memory_) m.release();
  }
  memory_.clear();
  if (failure_.has_value()) deferred_.Reject(failure_->toError(env).Value());
  else deferred_.Resolve(env.Undefined());
}

}  // namespace tlgloo
