#pragma once

#include <AddonFailure.h>

#include <string>

namespace tlgloo {

// A failure of the addon, with the kind that the TypeScript layer turns into a typed tensorlane
// error (the `code` property of the JS error).
class Failure : public tensorlane::AddonFailure {
 public:
  enum class Kind { Protocol, Timeout, Io, Aborted, Broken, Closed, Usage, DType };

  Failure(Kind kind, const std::string& message) : AddonFailure(message), kind_(kind) {}

  Kind kind() const { return kind_; }

  const char* codeName() const override {
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

 private:
  Kind kind_;
};

using tensorlane::guarded;

}  // namespace tlgloo
