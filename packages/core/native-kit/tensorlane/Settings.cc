#include "Settings.h"

#include <cstdlib>

namespace tensorlane {

std::optional<std::string> setting(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

Failure invalidSetting(const std::string& variable, const std::string& value, const std::string& accepts) {
  return Failure(FailureCode::Setting, variable + " must be " + accepts + ", got \"" + value + "\"")
      .with("variable", variable)
      .with("value", value)
      .with("accepts", accepts);
}

std::optional<int64_t> parseInteger(const std::string& text, int64_t min, int64_t max) {
  // 18 digits stay below INT64_MAX.
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int64_t value = std::stoll(text);
  if (value < min || value > max) return std::nullopt;
  return value;
}

}  // namespace tensorlane
