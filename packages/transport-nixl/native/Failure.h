// The one exception type of the addon. `code` tells the TypeScript side which typed tensorlane
// error to raise (src/internal/failures.ts maps them).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace tlnixl {

enum class FailureCode { Library, Protocol, Transfer, Aborted, Usage, Registration };

class Failure : public std::runtime_error {
 public:
  Failure(FailureCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  FailureCode code() const { return code_; }

  static const char* codeName(FailureCode code) {
    switch (code) {
      case FailureCode::Library: return "library";
      case FailureCode::Protocol: return "protocol";
      case FailureCode::Transfer: return "transfer";
      case FailureCode::Aborted: return "aborted";
      case FailureCode::Usage: return "usage";
      case FailureCode::Registration: return "registration";
    }
    return "usage";
  }

  Napi::Error toError(Napi::Env env) const {
    Napi::Error error = Napi::Error::New(env, what());
    error.Set("code", Napi::String::New(env, codeName(code_)));
    return error;
  }

 private:
  FailureCode code_;
};

}  // namespace tlnixl
