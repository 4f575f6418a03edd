// Byte ranges the shm transport exports in place (a consumer reads them at fetch time, from this
// process's mapping), by object id, until the object is released. Process-wide like SegmentTable:
// the transport pins on the transfer agent's thread, freeSymmetric asks on the main thread, so
// that a block still being read is not freed and handed to a new allocation. Ranges are addresses
// in mapped segments: they stay valid while pinned, since the exported tensor keeps its mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tensorlane::symmetric {

class ExportTable {
 public:
  static ExportTable& instance();

  void pin(const std::string& objectId, const uint8_t* address, size_t length);
  /** Forgets every range of the object; false when it pinned none. */
  bool release(const std::string& objectId);
  /** The objects with a pinned range overlapping [address, address + length). */
  std::vector<std::string> holders(const uint8_t* address, size_t length) const;

 private:
  struct Range {
    const uint8_t* begin;
    size_t length;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::vector<Range>> ranges_;
};

}  // namespace tensorlane::symmetric
