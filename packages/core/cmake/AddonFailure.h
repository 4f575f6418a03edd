// What every tensorlane addon throws and how it reaches JavaScript: an Error whose `code` (a
// lowercase word) the package's src/internal/failures.ts turns into a typed tensorlane error.
// On the include path of every addon built with tensorlane_addon() (TensorlaneAddon.cmake).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace tensorlane {

class AddonFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;

  // The `code` of the JS error.
  virtual const char* codeName() const = 0;

  Napi::Error toError(Napi::Env env) const {
    Napi::Error error = Napi::Error::New(env, what());
    error.Set("code", Napi::String::New(env, codeName()));
    return error;
  }
};

// Runs the body of a function called from JS: an AddonFailure becomes the JS error it describes.
template <typename F>
Napi::Value guarded(Napi::Env env, F&& body) {
  try {
    return body();
  } catch (const AddonFailure& failure) {
    throw failure.toError(env);
  }
}

}  // namespace tensorlane
