#include "ExportTable.h"

namespace tensorlane::symmetric {

ExportTable& ExportTable::instance() {
  static ExportTable table;
  return table;
}

void ExportTable::pin(const std::string& objectId, const uint8_t* address, size_t length) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[objectId].push_back(Range{address, length});
}

bool ExportTable::release(const std::string& objectId) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranges_.erase(objectId) > 0;
}

std::vector<std::string> ExportTable::holders(const uint8_t* address, size_t length) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [objectId, ranges] : ranges_) {
    for (const Range& r : ranges) {
      // Half-open ranges overlap when each starts before the other ends; an empty range holds nothing.
      if (r.length > 0 && length > 0 && r.begin < address + length && address < r.begin + r.length) {
        out.push_back(objectId);
        break;
      }
    }
  }
  return out;
}

}  // namespace tensorlane::symmetric
