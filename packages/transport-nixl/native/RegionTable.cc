#include "RegionTable.h"

namespace tensorlane::nixl {

Region* RegionTable::containing(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device) {
  // Regions are few (one per storage or pool) and may nest (a storage inside a pool registered
  // separately), so every region starting at or below `address` is a candidate: the largest wins.
  Region* best = nullptr;
  for (auto it = regions_.begin(); it != regions_.end() && it->first.first <= address; ++it) {
    Region& r = it->second;
    if (r.mem != mem || r.device != device) continue;
    if (address - r.address <= r.length && length <= r.length - (address - r.address)) {
      if (best == nullptr || r.length > best->length) best = &r;
    }
  }
  return best;
}

Region* RegionTable::find(const Key& key) {
  auto it = regions_.find(key);
  return it == regions_.end() ? nullptr : &it->second;
}

Region& RegionTable::insert(const Region& region) {
  return regions_[Key(region.address, region.length)] = region;
}

void RegionTable::erase(const Key& key) { regions_.erase(key); }

std::vector<Region> RegionTable::all() const {
  std::vector<Region> out;
  out.reserve(regions_.size());
  for (const auto& [key, region] : regions_) out.push_back(region);
  return out;
}

}  // namespace tensorlane::nixl
