// Memory of another process, as its metadata describes it.
#pragma once

#include "NixlCapi.h"

#include <cstdint>
#include <string>

namespace tensorlane::nixl {

/** A region a producer declares in an object's metadata. */
struct RemoteRegion {
  uint64_t address = 0;
  uint64_t length = 0;
  nixl_capi_mem_type_t mem = NIXL_CAPI_MEM_DRAM;
  uint64_t device = 0;
};

/** One registered descriptor of a peer's NIXL metadata, with the backend's key bytes. */
struct RemoteDesc {
  uint64_t address = 0;
  uint64_t length = 0;
  uint64_t device = 0;
  int mem = 0;
  std::string key;

  bool operator==(const RemoteDesc& other) const {
    return address == other.address && length == other.length && device == other.device && mem == other.mem && key == other.key;
  }
  bool overlaps(const RemoteRegion& r) const {
    return mem == r.mem && device == r.device && address < r.address + r.length && r.address < address + length;
  }
};

}  // namespace tensorlane::nixl
