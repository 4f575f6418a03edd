// Environment settings that native code reads, read as core's Settings.ts reads them: unset and
// empty both mean "not set", and a value the variable does not accept is a Failure(Setting) that
// names the variable, the value and what it accepts (core raises it as InvalidSettingError).
#pragma once

#include "Failure.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tensorlane {

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> setting(const char* variable);

// The failure for a value the variable does not accept; `accepts` completes "<variable> must be ...".
Failure invalidSetting(const std::string& variable, const std::string& value, const std::string& accepts);

// `text` as an integer from `min` to `max` (non-negative: decimal digits only); nullopt otherwise.
std::optional<int64_t> parseInteger(const std::string& text, int64_t min, int64_t max);

}  // namespace tensorlane
