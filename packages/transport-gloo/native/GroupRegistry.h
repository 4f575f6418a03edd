#pragma once

#include "GroupState.h"

#include <memory>
#include <string>
#include <vector>

namespace tensorlane::gloo {

// The connected groups of this process by name, for every JS environment of it: the transfer agent
// creates and destroys them, and any thread of the process can receive through them (the
// transport declares anyThread), because the gloo context and its pairs are process-wide anyway.
class GroupRegistry {
 public:
  static void publish(const std::string& name, const std::shared_ptr<GroupState>& state);
  // Removes `name` if it still names `state` (a group of the same name created since stays).
  static void withdraw(const std::string& name, const GroupState* state);
  // Null when no group of that name is published (never created here, or destroyed).
  static std::shared_ptr<GroupState> find(const std::string& name);
  // The names of the published groups that are alive.
  static std::vector<std::string> names();
};

}  // namespace tensorlane::gloo
