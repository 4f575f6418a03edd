// The one exception type of the addon. `code` tells the TypeScript side which typed error to raise
// (src/internal/failures.ts maps them).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace tlsym {

enum class FailureCode { Usage, System, Protocol, Library };

class Failure : public std::runtime_error {
 public:
  Failure(FailureCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  FailureCode code() const { return code_; }

  Napi::Error toError(Napi::Env env) const {
    Napi::Error error = Napi::Error::New(env, what());
    const char* name = "usage";
    switch (code_) {
      case FailureCode::Usage: name = "usage"; break;
      case FailureCode::System: name = "system"; break;
      case FailureCode::Protocol: name = "protocol"; break;
      case FailureCode::Library: name = "library"; break;
    }
    error.Set("code", Napi::String::New(env, name));
    return error;
  }

 private:
  FailureCode code_;
};

/** A Failure(System) carrying strerror(errno) of the call that just failed. */
Failure systemFailure(const std::string& what);

}  // namespace tlsym
