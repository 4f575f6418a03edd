#pragma once

#include <cstdlib>

namespace tlgloo {

// An environment variable's value; nullptr when unset or empty (an empty value means "not set").
inline const char* setting(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

}  // namespace tlgloo
