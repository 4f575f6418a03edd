// The one exception type of the addon. Its code tells the TypeScript side which typed error to
// raise (src/internal/failures.ts maps them).
#pragma once

#include <AddonFailure.h>

#include <string>

namespace tlnccl {

enum class FailureCode { Library, NoDevice, Version, Usage, Nccl, Cuda, Timeout, Aborted, Closed };

class Failure : public tensorlane::AddonFailure {
 public:
  Failure(FailureCode code, const std::string& message) : AddonFailure(message), code_(code) {}

  FailureCode code() const { return code_; }

  const char* codeName() const override {
    switch (code_) {
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

 private:
  FailureCode code_;
};

using tensorlane::guarded;

}  // namespace tlnccl
