#include "Failure.h"

#include <cerrno>
#include <cstring>

namespace tensorlane {

namespace {

const char* codeName(FailureCode code) {
  switch (code) {
    case FailureCode::Usage: return "usage";
    case FailureCode::Protocol: return "protocol";
    case FailureCode::Setting: return "setting";
    case FailureCode::Library: return "library";
    case FailureCode::System: return "system";
    case FailureCode::Io: return "io";
    case FailureCode::Timeout: return "timeout";
    case FailureCode::Aborted: return "aborted";
    case FailureCode::Broken: return "broken";
    case FailureCode::Closed: return "closed";
    case FailureCode::DType: return "dtype";
    case FailureCode::Shape: return "shape";
    case FailureCode::Transfer: return "transfer";
    case FailureCode::Registration: return "registration";
    case FailureCode::NoDevice: return "nodevice";
    case FailureCode::Version: return "version";
    case FailureCode::Nccl: return "nccl";
    case FailureCode::Cuda: return "cuda";
  }
  return "usage";
}

}  // namespace

Failure& Failure::with(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
  return *this;
}

Napi::Error Failure::toError(Napi::Env env) const {
  Napi::Error error = Napi::Error::New(env, what());
  error.Set("code", Napi::String::New(env, codeName(code_)));
  for (const auto& [name, value] : fields_) error.Set(name, Napi::String::New(env, value));
  return error;
}

Failure systemFailure(const std::string& what) {
  return Failure(FailureCode::System, what + ": " + std::strerror(errno));
}

}  // namespace tensorlane
