// Settles a JS promise from a native thread: made on the JS thread that asks (the main thread or a
// worker), handed the outcome by whichever thread did the work, settled on the asking thread
// through a thread-safe function.
//
// The asking thread's environment may end first (a worker terminates). Node frees an
// environment's thread-safe functions when it ends, whether or not a thread still holds one, and
// memory the work writes into may end with it. So a settler counts as running in its environment
// until its work finishes, and the environment's teardown refuses every later call (no freed
// thread-safe function is touched). For work that writes into memory of the environment (its
// settler was given `abort`), the teardown also calls `abort` and waits until the work finished.
#pragma once

#include "Failure.h"

#include <napi.h>

#include <atomic>
#include <functional>
#include <memory>

namespace tensorlane {

class Environment;

class Settler : public std::enable_shared_from_this<Settler> {
 public:
  using Settle = std::function<void(Napi::Env, Napi::Promise::Deferred&)>;

  // JS thread. `abort`, when given: the work writes into memory of this environment, whose
  // teardown then calls `abort` (which must end the work soon) and waits for finish().
  static std::shared_ptr<Settler> create(Napi::Env env, std::function<void()> abort = nullptr);

  Napi::Promise promise() const { return deferred_.Promise(); }

  // JS thread: the pending settlement no longer keeps the thread's event loop alive.
  void unref(Napi::Env env);

  // Any thread, once: the work is over, and `settle` runs on the JS thread. With `more`, one post()
  // may follow. False when the environment is gone: nothing runs, and what the work holds of the
  // environment (references) is left to it.
  bool finish(Settle settle, bool more = false);
  // finish() that resolves the promise with what `value` makes on the JS thread (undefined without it).
  bool resolve(std::function<Napi::Value(Napi::Env)> value = nullptr);
  bool reject(const Failure& failure);

  // Any thread, once, after finish(..., true) returned true: `run` runs on the JS thread. False when
  // the environment is gone.
  bool post(std::function<void(Napi::Env)> run);

  // JS thread, instead of finish(): the work never started.
  void cancel();

 private:
  explicit Settler(Napi::Env env);

  Environment& environment_;
  Napi::Promise::Deferred deferred_;
  Napi::ThreadSafeFunction tsfn_;
  // JS thread only: whether the thread-safe function still exists.
  bool open_ = true;
  // Whether a post() may still use the thread-safe function.
  std::atomic<bool> held_{true};
};

}  // namespace tensorlane
