// What one fetch reads: the producer's declared regions and tensor layouts, checked against each
// other, and the consumer's destination buffers. Built and checked on the JS thread (a hostile
// descriptor fails there, before any NIXL call); executed by ReadJob on its own thread.
#pragma once

#include "MetadataBlob.h"
#include "NixlCapi.h"
#include "ProcessAgent.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tensorlane::nixl {

/** One tensor as the producer laid it out inside one of its declared regions. */
struct RemoteTensor {
  uint32_t region = 0;
  /** Bytes from the region's start to the tensor's first element. */
  uint64_t offset = 0;
  std::vector<uint64_t> shape;
  /** In elements, as the producer's view has them (strided views read run by run). */
  std::vector<uint64_t> strides;
  uint64_t itemSize = 0;
};

/** A contiguous destination inside a storage of this process. */
struct LocalTensor {
  uintptr_t address = 0;
  uint64_t nbytes = 0;
  uintptr_t storageAddress = 0;
  uint64_t storageLength = 0;
  nixl_capi_mem_type_t mem = NIXL_CAPI_MEM_DRAM;
  uint64_t device = 0;
};

/** One descriptor pair of the READ: `length` bytes from `remote` into `local`. */
struct Span {
  uint64_t remote = 0;
  uintptr_t local = 0;
  uint64_t length = 0;
  nixl_capi_mem_type_t remoteMem = NIXL_CAPI_MEM_DRAM;
  uint64_t remoteDevice = 0;
  nixl_capi_mem_type_t localMem = NIXL_CAPI_MEM_DRAM;
  uint64_t localDevice = 0;
  /** The producer's declared region and the local storage it lies in: each is a registration of its own, which one descriptor cannot cross. */
  size_t region = 0;
  uintptr_t localStorage = 0;
};

class ReadPlan {
 public:
  /** Most descriptors one fetch may post: a view strided down to single elements must be copied contiguous by its producer first. */
  static constexpr uint64_t kMaxSpans = 1u << 20;

  ReadPlan(std::string agent, std::string blob, uint64_t epoch, std::vector<RemoteRegion> regions, std::vector<RemoteTensor> remote,
           std::vector<LocalTensor> local);

  const std::string& agent() const { return agent_; }
  const std::string& blob() const { return blob_; }
  uint64_t epoch() const { return epoch_; }
  const std::vector<RemoteRegion>& regions() const { return regions_; }
  /** What the producer's blob registers, as checked. */
  const std::vector<RemoteDesc>& descs() const { return descs_; }
  const std::vector<LocalTensor>& local() const { return local_; }
  const std::vector<Span>& spans() const { return spans_; }

 private:
  /** Throws a Protocol failure unless the tensor lies inside its declared region; appends its spans. */
  void plan(const RemoteTensor& remote, const LocalTensor& local, size_t index);

  std::string agent_;
  std::string blob_;
  uint64_t epoch_;
  std::vector<RemoteRegion> regions_;
  std::vector<RemoteDesc> descs_;
  std::vector<LocalTensor> local_;
  std::vector<Span> spans_;
};

}  // namespace tensorlane::nixl
