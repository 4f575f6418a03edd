// The one failure type of every tensorlane addon, and how it reaches JavaScript: an Error whose
// `code` names the kind of failure. Core turns each code into the same typed tensorlane error for
// every addon (src/NativeFailure.ts of @tensorlane/core).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tensorlane {

// The kinds of failure every addon shares; the JS `code` of each is its name in lowercase.
enum class FailureCode {
  Usage,         // a call the addon refuses: a bad argument, the wrong state
  Protocol,      // data from a peer that does not decode or does not fit
  Setting,       // an environment setting with a value it does not accept (Settings.h)
  Library,       // a runtime library that is missing, or not the one expected
  System,        // a system call failed
  Io,            // a connection or its peer failed
  Timeout,
  Aborted,
  Broken,        // a group that an earlier failure left unusable
  Closed,        // what the operation needed was destroyed meanwhile
  DType,         // a dtype the operation cannot handle
  Shape,         // tensors of other sizes than the operation needs (a peer's, or the caller's)
  Transfer,      // a transfer failed
  Registration,  // memory could not be registered
  NoDevice,      // no CUDA device, or not the one asked for
  Version,       // the loaded library is too old for the feature
  Nccl,          // NCCL reported a failure
  Cuda,          // the CUDA runtime reported a failure
};

class Failure : public std::runtime_error {
 public:
  Failure(FailureCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  FailureCode code() const { return code_; }

  // Adds a string property to the JS error (an invalid setting's variable and value, say).
  Failure& with(std::string name, std::string value);

  Napi::Error toError(Napi::Env env) const;

 private:
  FailureCode code_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

// A Failure(System) that carries strerror(errno) of the call that just failed.
Failure systemFailure(const std::string& what);

// Runs the body of a function called from JS: a Failure becomes the JS error it describes, and so
// does any other exception (a library's own, std::bad_alloc), as a System failure: node-addon-api
// hands only a Napi::Error on to JS, and anything else that leaves a JS call aborts the process.
template <typename F>
Napi::Value guarded(Napi::Env env, F&& body) {
  try {
    return body();
  } catch (const Failure& failure) {
    throw failure.toError(env);
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw Failure(FailureCode::System, error.what()).toError(env);
  }
}

}  // namespace tensorlane
