#include "Settler.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

namespace tensorlane {

// The settlers one JavaScript environment has running, and its teardown.
class Environment {
 public:
  // JS thread: the environment's, attached (with its cleanup hook) on first use.
  static Environment& of(Napi::Env env) {
    void* data = nullptr;
    napi_get_instance_data(env, &data);
    if (data != nullptr) return *static_cast<Environment*>(data);
    // Leaked on purpose (one per environment): threads of its settlers may reach it after the
    // environment's instance data is finalized.
    auto* environment = new Environment();
    napi_status status = napi_add_env_cleanup_hook(env, tearDown, environment);
    if (status == napi_ok) status = napi_set_instance_data(env, environment, nullptr, nullptr);
    if (status != napi_ok) throw Napi::Error::New(env, "tensorlane addon: cannot attach to this JavaScript environment");
    return *environment;
  }

  // JS thread.
  void add(const Settler* settler, std::function<void()> abort) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.emplace(settler, std::move(abort));
  }

  // Any thread: forgets `settler` and, unless the environment is gone, returns what `handOver`
  // (which queues a call to the JS thread) returns; both under the lock the teardown takes, so
  // that the environment cannot end in between.
  template <typename F>
  bool end(const Settler* settler, F&& handOver) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(settler);
    idle_.notify_all();
    return !gone_ && handOver();
  }

  // Any thread: what `call` returns, called under the lock unless the environment is gone.
  template <typename F>
  bool ifPresent(F&& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    return !gone_ && call();
  }

 private:
  // Cleanup hooks run before the environment frees its handles (thread-safe functions included),
  // so waiting here keeps every waited-for settler's thread-safe function and memory alive until
  // its thread is done with them.
  static void tearDown(void* self) {
    auto* environment = static_cast<Environment*>(self);
    std::vector<std::function<void()>> aborts;
    {
      std::lock_guard<std::mutex> lock(environment->mutex_);
      environment->gone_ = true;
      for (const auto& [settler, abort] : environment->running_) {
        if (abort) aborts.push_back(abort);
      }
    }
    // Outside the lock: an abort may take locks that a finishing thread holds while it ends.
    for (const auto& abort : aborts) abort();
    std::unique_lock<std::mutex> lock(environment->mutex_);
    environment->idle_.wait(lock, [environment] {
      for (const auto& [settler, abort] : environment->running_) {
        if (abort) return false;
      }
      return true;
    });
  }

  std::mutex mutex_;
  std::condition_variable idle_;
  // Running settlers, with what aborts their work when the environment's teardown must wait for it.
  std::map<const Settler*, std::function<void()>> running_;
  bool gone_ = false;
};

Settler::Settler(Napi::Env env)
    : environment_(Environment::of(env)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tsfn_(Napi::ThreadSafeFunction::New(env, Napi::Function(), "tensorlane.settle", 0, 1)) {}

std::shared_ptr<Settler> Settler::create(Napi::Env env, std::function<void()> abort) {
  std::shared_ptr<Settler> settler(new Settler(env));
  settler->environment_.add(settler.get(), std::move(abort));
  return settler;
}

void Settler::unref(Napi::Env env) {
  if (open_) tsfn_.Unref(env);
}

bool Settler::finish(Settle settle, bool more) {
  auto self = shared_from_this();
  const bool handedOver = environment_.end(this, [&] {
    const napi_status status = tsfn_.BlockingCall([self, settle = std::move(settle), more](Napi::Env env, Napi::Function) {
      if (!more) self->open_ = false;
      settle(env, self->deferred_);
    });
    if (status != napi_ok || !more) tsfn_.Release();
    return status == napi_ok;
  });
  held_ = handedOver && more;
  return handedOver;
}

bool Settler::resolve(std::function<Napi::Value(Napi::Env)> value) {
  return finish([value = std::move(value)](Napi::Env env, Napi::Promise::Deferred& deferred) {
    deferred.Resolve(value ? value(env) : env.Undefined());
  });
}

bool Settler::reject(const Failure& failure) {
  return finish([failure](Napi::Env env, Napi::Promise::Deferred& deferred) { deferred.Reject(failure.toError(env).Value()); });
}

bool Settler::post(std::function<void(Napi::Env)> run) {
  if (!held_.exchange(false)) return false;
  auto self = shared_from_this();
  return environment_.ifPresent([&] {
    const napi_status status = tsfn_.BlockingCall([self, run = std::move(run)](Napi::Env env, Napi::Function) {
      self->open_ = false;
      run(env);
    });
    tsfn_.Release();
    return status == napi_ok;
  });
}

void Settler::cancel() {
  open_ = false;
  held_ = false;
  environment_.end(this, [this] { return tsfn_.Release() == napi_ok; });
}

}  // namespace tensorlane
