// Argument checks the bindings share: a JS number becomes a size only when it is one exactly
// (casting a negative, fractional or huge double to an unsigned type is undefined behaviour).
#pragma once

#include "Failure.h"

#include <napi.h>

#include <cstdint>
#include <string>

namespace tlsym {

/** A non-negative safe integer; sizes and offsets may come from peers, hence a protocol failure. */
inline uint64_t uintArg(const Napi::CallbackInfo& info, size_t i, const char* what) {
  if (!info[i].IsNumber()) throw Failure(FailureCode::Protocol, std::string(what) + " must be a number");
  double d = info[i].As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || d != static_cast<double>(static_cast<uint64_t>(d))) {
    throw Failure(FailureCode::Protocol, std::string(what) + " must be a non-negative integer");
  }
  return static_cast<uint64_t>(d);
}

}  // namespace tlsym
