// Entry point of the tensorlane Gloo addon: the `Group` class and what `glooStatus()` reports.
#include "Device.h"
#include "GlooGroup.h"

#include <tensorlane/Failure.h>
#include <tensorlane/Teardown.h>

#include <gloo/config.h>

#include <napi.h>

#include <string>

namespace tensorlane::gloo {

// Opens (or reuses) the process's TCP device and describes it: "[host]:port".
Napi::Value DeviceAddress(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value { return Napi::String::New(info.Env(), Device::shared()->str()); });
}

}  // namespace tensorlane::gloo

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  tensorlane::holdThroughTeardown(env);
  exports.Set("Group", tensorlane::gloo::GlooGroup::Define(env));
  exports.Set("deviceAddress", Napi::Function::New(env, tensorlane::gloo::DeviceAddress, "deviceAddress"));
  exports.Set("glooVersion", Napi::String::New(env, std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                                                         std::to_string(GLOO_VERSION_PATCH)));
  return exports;
}

NODE_API_MODULE(tensorlane_gloo, Init)
