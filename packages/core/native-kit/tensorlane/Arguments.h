// The JS arguments of addon functions, checked before any cast (casting a negative, fractional or
// huge double to an integer type is undefined behaviour). `code` says whose mistake a bad value is:
// Usage for what the caller passes, Protocol for values that come from a peer.
#pragma once

#include "Failure.h"

#include <napi.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tensorlane {

// The largest integer a JS number holds exactly (Number.MAX_SAFE_INTEGER).
constexpr int64_t kMaxSafeInteger = 9007199254740991LL;

// A number that is an integer from `min` to `max`.
int64_t integerArg(const Napi::Value& value, const std::string& what, int64_t min, int64_t max, FailureCode code = FailureCode::Usage);

// A non-negative safe integer, given as a number or a bigint (a size, an offset, a count).
uint64_t sizeArg(const Napi::Value& value, const std::string& what, FailureCode code = FailureCode::Usage);

// A bigint that fits in 64 bits unsigned: a native address or handle.
uintptr_t addressArg(const Napi::Value& value, const std::string& what);

// A positive number of milliseconds, rounded up, and at most 100 hours: far beyond any real wait,
// and small enough for steady_clock arithmetic not to overflow.
std::chrono::milliseconds timeoutArg(const Napi::Value& value, const std::string& what = "timeoutMs");

std::string stringArg(const Napi::Value& value, const std::string& what, FailureCode code = FailureCode::Usage);

Napi::Uint8Array bytesArg(const Napi::Value& value, const std::string& what, FailureCode code = FailureCode::Usage);

}  // namespace tensorlane
