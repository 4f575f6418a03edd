// The one exception type of the addon. Its code tells the TypeScript side which typed error to
// raise (src/internal/failures.ts maps them).
#pragma once

#include <AddonFailure.h>

#include <string>

namespace tlnixl {

enum class FailureCode { Library, Protocol, Transfer, Aborted, Usage, Registration };

class Failure : public tensorlane::AddonFailure {
 public:
  Failure(FailureCode code, const std::string& message) : AddonFailure(message), code_(code) {}

  FailureCode code() const { return code_; }

  const char* codeName() const override {
    switch (code_) {
      case FailureCode::Library: return "library";
      case FailureCode::Protocol: return "protocol";
      case FailureCode::Transfer: return "transfer";
      case FailureCode::Aborted: return "aborted";
      case FailureCode::Usage: return "usage";
      case FailureCode::Registration: return "registration";
    }
    return "usage";
  }

 private:
  FailureCode code_;
};

using tensorlane::guarded;

}  // namespace tlnixl
