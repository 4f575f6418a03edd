#include "EnvReads.h"

namespace tlnixl {

void EnvReads::Install(Napi::Env env) {
  // Leaked on purpose (one per environment): threads of its reads may still reach it after the
  // environment's instance data is finalized.
  auto* reads = new EnvReads();
  napi_status status = napi_add_env_cleanup_hook(env, TearDown, reads);
  if (status == napi_ok) status = napi_set_instance_data(env, reads, nullptr, nullptr);
  if (status != napi_ok) throw Napi::Error::New(env, "tensorlane NIXL addon: cannot attach to this JavaScript environment");
}

EnvReads& EnvReads::Of(Napi::Env env) {
  void* reads = nullptr;
  napi_get_instance_data(env, &reads);
  return *static_cast<EnvReads*>(reads);
}

void EnvReads::add(const AbortFlag& aborted) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_.insert(aborted);
}

void EnvReads::forget(const AbortFlag& aborted) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_.erase(aborted);
}

void EnvReads::TearDown(void* self) {
  // Cleanup hooks run before the environment frees its handles (thread-safe functions included),
  // so waiting here keeps every read's thread-safe function alive until its thread let go of it.
  auto* reads = static_cast<EnvReads*>(self);
  std::unique_lock<std::mutex> lock(reads->mutex_);
  reads->gone_ = true;
  for (const AbortFlag& aborted : reads->running_) aborted->store(true);
  reads->idle_.wait(lock, [reads] { return reads->running_.empty(); });
}

}  // namespace tlnixl
