// The one exception type of the addon. `code` tells the TypeScript side which typed error to raise
// (src/internal/failures.ts maps them).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace tlnccl {

enum class FailureCode { Library, NoDevice, Version, Usage, Nccl, Cuda, Timeout, Aborted, Closed };

class Failure : public std::runtime_error {
 public:
  Failure(FailureCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  FailureCode code() const { return code_; }

  static const char* codeName(FailureCode code) {
    switch (code) {
      case FailureCode::Library: return "library";
      case FailureCode::NoDevice: return "nodevice";
      case FailureCode::Version: return "version";
      case FailureCode::Usage: return "usage";
      case FailureCode::Nccl: return "nccl";
      case FailureCode::Cuda: return "cuda";
      case FailureCode::Timeout: return "timeout";
      case FailureCode::Aborted: return "aborted";
      case FailureCode::Closed: return "closed";
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

}  // namespace tlnccl
