// Registered memory regions of this process with reference counts: the bookkeeping behind "a
// storage is registered once, however many objects and pins point into it". Not thread-safe on
// its own: ProcessAgent guards it with its mutex.
#pragma once

#include "NixlCapi.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace tensorlane::nixl {

struct Region {
  uintptr_t address = 0;
  size_t length = 0;
  nixl_capi_mem_type_t mem = NIXL_CAPI_MEM_DRAM;
  uint64_t device = 0;
  uint64_t refs = 0;
  /** The NIXL descriptor list it was registered with, kept to deregister exactly that. */
  nixl_capi_reg_dlist_t dlist = nullptr;
};

class RegionTable {
 public:
  using Key = std::pair<uintptr_t, size_t>;

  /** The live region that holds [address, address + length) on that memory kind and device, if any. */
  Region* containing(uintptr_t address, size_t length, nixl_capi_mem_type_t mem, uint64_t device);

  Region* find(const Key& key);
  Region& insert(const Region& region);
  void erase(const Key& key);
  std::vector<Region> all() const;

 private:
  std::map<Key, Region> regions_;
};

}  // namespace tensorlane::nixl
