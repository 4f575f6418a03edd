// Entry point of the tensorlane Gloo addon: the `Group` class and what `glooStatus()` reports.
#include "Device.h"
#include "Failure.h"
#include "GlooGroup.h"

#include <gloo/config.h>

#include <napi.h>

#include <string>

namespace tlgloo {

// Opens (or reuses) the process's TCP device and describes it: "[host]:port".
Napi::Value DeviceAddress(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value { return Napi::String::New(info.Env(), Device::shared()->str()); });
}

}  // namespace tlgloo

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("Group", tlgloo::GlooGroup::Define(env));
  exports.Set("deviceAddress", Napi::Function::New(env, tlgloo::DeviceAddress, "deviceAddress"));
  exports.Set("glooVersion", Napi::String::New(env, std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) + "." +
                                                         std::to_string(GLOO_VERSION_PATCH)));
  return exports;
}


NODE_API_MODULE(tensorlane_gloo, Init)
