// The one exception type of the addon. Its code tells the TypeScript side which typed error to
// raise (src/internal/failures.ts maps them).
#pragma once

#include <AddonFailure.h>

#include <string>

namespace tlsym {

enum class FailureCode { Usage, System, Protocol, Library };

class Failure : public tensorlane::AddonFailure {
 public:
  Failure(FailureCode code, const std::string& message) : AddonFailure(message), code_(code) {}

  FailureCode code() const { return code_; }

  const char* codeName() const override {
    switch (code_) {
      case FailureCode::Usage: return "usage";
      case FailureCode::System: return "system";
      case FailureCode::Protocol: return "protocol";
      case FailureCode::Library: return "library";
    }
    return "usage";
  }

 private:
  FailureCode code_;
};

/** A Failure(System) carrying strerror(errno) of the call that just failed. */
Failure systemFailure(const std::string& what);

using tensorlane::guarded;

}  // namespace tlsym
