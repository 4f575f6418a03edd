#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace tlgloo {

// A failure of the addon, with the kind that the TypeScript layer turns into a typed tensorlane
// error (the `code` property of the JS error).
class Failure : public std::runtime_error {
 public:
  enum class Kind { Protocol, Timeout, Io, Aborted, Broken, Closed, Usage, DType };

  Failure(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

  Kind kind() const { return kind_; }

  const char* code() const {
    switch (kind_) {
      case Kind::Protocol: return "protocol";
      case Kind::Timeout: return "timeout";
      case Kind::Io: return "io";
      case Kind::Aborted: return "aborted";
      case Kind::Broken: return "broken";
      case Kind::Closed: return "closed";
      case Kind::Usage: return "usage";
      case Kind::DType: return "dtype";
    }
    return "io";
  }

  Napi::Error toError(Napi::Env env) const {
    Napi::Error error = Napi::Error::New(env, what());
    error.Set("code", Napi::String::New(env, code()));
    return error;
  }

 private:
  Kind kind_;
};

}  // namespace tlgloo
