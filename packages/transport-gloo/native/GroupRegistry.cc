#include "GroupRegistry.h"

#include <map>
#include <mutex>

namespace tensorlane::gloo {

namespace {

std::mutex& registryMutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, std::weak_ptr<GroupState>>& registry() {
  static std::map<std::string, std::weak_ptr<GroupState>> groups;
  return groups;
}

}  // namespace

void GroupRegistry::publish(const std::string& name, const std::shared_ptr<GroupState>& state) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry()[name] = state;
}

void GroupRegistry::withdraw(const std::string& name, const GroupState* state) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(name);
  if (it == registry().end()) return;
  auto current = it->second.lock();
  if (current == nullptr || current.get() == state) registry().erase(it);
}

std::shared_ptr<GroupState> GroupRegistry::find(const std::string& name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second.lock();
}

std::vector<std::string> GroupRegistry::names() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<std::string> names;
  for (const auto& [name, state] : registry()) {
    if (!state.expired()) names.push_back(name);
  }
  return names;
}

}  // namespace tensorlane::gloo
