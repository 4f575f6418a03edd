#include "Teardown.h"

namespace tensorlane {

namespace {

// An asynchronous cleanup hook holds a reference to the environment until it is removed, and its
// removal drops that reference from a native immediate, queued behind the immediates already
// queued. The teardown waits for the hook, spinning the event loop; the hook is removed when the
// keeper (a thread-safe function nothing calls) is finalized, which happens when that loop closes
// the keeper's handle: after the collections the teardown's loop ran, whose finalizer immediates
// are queued, so they run before the reference is dropped.
struct Hold {
  napi_async_cleanup_hook_handle hook = nullptr;
};

void awaitKeeper(napi_async_cleanup_hook_handle, void*) {}

void release(napi_env, void* data, void*) {
  auto* hold = static_cast<Hold*>(data);
  napi_remove_async_cleanup_hook(hold->hook);
  delete hold;
}

void neverCalled(napi_env, napi_value, void*, void*) {}

}  // namespace

void holdThroughTeardown(Napi::Env env) {
  auto* hold = new Hold();
  napi_status status = napi_add_async_cleanup_hook(env, awaitKeeper, hold, &hold->hook);
  if (status != napi_ok) {
    delete hold;
    throw Napi::Error::New(env, "tensorlane addon: cannot attach to this JavaScript environment");
  }
  napi_threadsafe_function keeper = nullptr;
  status = napi_create_threadsafe_function(env, nullptr, nullptr, Napi::String::New(env, "tensorlane.keeper"), 0, 1, hold, release,
                                           nullptr, neverCalled, &keeper);
  if (status != napi_ok) {
    napi_remove_async_cleanup_hook(hold->hook);
    delete hold;
    throw Napi::Error::New(env, "tensorlane addon: cannot attach to this JavaScript environment");
  }
  // The keeper never keeps the event loop alive.
  napi_unref_threadsafe_function(env, keeper);
}

}  // namespace tensorlane
