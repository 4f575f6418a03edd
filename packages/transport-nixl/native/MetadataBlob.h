// Structural check of a peer's NIXL metadata blob before NIXL sees it. NIXL 1.5.1's deserializer
// aborts the process on some malformed input (zeros, truncation), so a hostile or corrupt blob
// must be refused here, as a Protocol failure.
//
// The layout (nixlSerDes, as 1.5.1 writes it): "nixlSerDes|" then records `tag, u64 length,
// bytes, '|'`: Agent, Conns (count) with (t, c) per backend, "" = "MemSection", nixlSecElms
// (count) with per section bknd, nixlDList = "nixlSDList", t (memory kind), n (count) and one ""
// record per registered descriptor (address, length, device, then the backend's key), and
// optionally UserMDs (count) with (k, v) pairs. The blob must end with the last record.
//
// What cannot be checked: the contents of UCX's worker address (c) and memory keys, which UCX
// unpacks itself; a peer that forges those within valid framing is trusted as far as UCX is.
#pragma once

#include "RemoteMemory.h"

#include <string>
#include <vector>

namespace tensorlane::nixl {

class MetadataBlob {
 public:
  /**
   * Throws a Protocol failure unless `blob` is well-framed 1.5.1 metadata of agent `agent` that
   * registers every one of `regions` (each inside one registered descriptor of its memory kind);
   * returns the descriptors it registers.
   */
  static std::vector<RemoteDesc> check(const std::string& blob, const std::string& agent, const std::vector<RemoteRegion>& regions);
};

}  // namespace tensorlane::nixl
