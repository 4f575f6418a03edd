#include "Arguments.h"

#include <algorithm>
#include <cmath>

namespace tensorlane {

int64_t integerArg(const Napi::Value& value, const std::string& what, int64_t min, int64_t max, FailureCode code) {
  if (!value.IsNumber()) throw Failure(code, what + " must be a number");
  const double d = value.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(min) || d > static_cast<double>(max)) {
    throw Failure(code, min == 0 && max == kMaxSafeInteger ? what + " must be a non-negative integer"
                                                           : what + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return static_cast<int64_t>(d);
}

uint64_t sizeArg(const Napi::Value& value, const std::string& what, FailureCode code) {
  if (!value.IsBigInt()) return static_cast<uint64_t>(integerArg(value, what, 0, kMaxSafeInteger, code));
  bool lossless = false;
  const uint64_t out = value.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) throw Failure(code, what + " must be a non-negative integer");
  return out;
}

uintptr_t addressArg(const Napi::Value& value, const std::string& what) {
  static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "addresses travel as 64-bit bigints");
  if (!value.IsBigInt()) throw Failure(FailureCode::Usage, what + " must be a bigint");
  bool lossless = false;
  const uint64_t out = value.As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) throw Failure(FailureCode::Usage, what + " must fit in 64 bits");
  return static_cast<uintptr_t>(out);
}

std::chrono::milliseconds timeoutArg(const Napi::Value& value, const std::string& what) {
  if (!value.IsNumber()) throw Failure(FailureCode::Usage, what + " must be a number");
  const double ms = value.As<Napi::Number>().DoubleValue();
  if (!(ms > 0)) throw Failure(FailureCode::Usage, what + " must be positive");
  constexpr double kLongest = 100.0 * 3600 * 1000;
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(std::min(ms, kLongest))));
}

std::string stringArg(const Napi::Value& value, const std::string& what, FailureCode code) {
  if (!value.IsString()) throw Failure(code, what + " must be a string");
  return value.As<Napi::String>().Utf8Value();
}

Napi::Uint8Array bytesArg(const Napi::Value& value, const std::string& what, FailureCode code) {
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
    throw Failure(code, what + " must be a Uint8Array");
  }
  return value.As<Napi::Uint8Array>();
}

}  // namespace tensorlane
