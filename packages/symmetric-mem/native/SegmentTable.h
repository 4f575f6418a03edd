// The segments this process has mapped, by key, shared by every thread. A symmetric heap is mapped
// by the shm transport on the transfer agent's worker thread (at group creation) and used by
// allocateSymmetric on the main thread; both find it here, so each process maps a segment once.
#pragma once

#include "Segment.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tensorlane::symmetric {

class SegmentTable {
 public:
  static SegmentTable& instance();

  /** Fails if `key` is taken: a group name maps one heap at a time. */
  void put(const std::string& key, std::shared_ptr<Segment> segment);
  std::shared_ptr<Segment> get(const std::string& key) const;
  /** Forgets the key; the mapping lives on while buffers over it do. */
  bool remove(const std::string& key);
  /** A writable segment holding the whole range, and the range's offset in its data. */
  std::optional<std::pair<std::string, uint64_t>> locate(const uint8_t* address, size_t length) const;
  std::vector<std::string> keys() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Segment>> segments_;
};

}  // namespace tensorlane::symmetric
