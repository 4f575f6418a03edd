#include "SegmentTable.h"

#include <tensorlane/Failure.h>

namespace tensorlane::symmetric {

SegmentTable& SegmentTable::instance() {
  static SegmentTable table;
  return table;
}

void SegmentTable::put(const std::string& key, std::shared_ptr<Segment> segment) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!segments_.emplace(key, std::move(segment)).second) {
    throw Failure(FailureCode::Usage, "a segment is already mapped as \"" + key + "\" in this process");
  }
}

std::shared_ptr<Segment> SegmentTable::get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = segments_.find(key);
  return found == segments_.end() ? nullptr : found->second;
}

bool SegmentTable::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return segments_.erase(key) > 0;
}

std::optional<std::pair<std::string, uint64_t>> SegmentTable::locate(const uint8_t* address, size_t length) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, segment] : segments_) {
    if (segment->writable() && segment->contains(address, length)) {
      return std::make_pair(key, static_cast<uint64_t>(address - segment->data()));
    }
  }
  return std::nullopt;
}

std::vector<std::string> SegmentTable::keys() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& entry : segments_) out.push_back(entry.first);
  return out;
}

}  // namespace tensorlane::symmetric
