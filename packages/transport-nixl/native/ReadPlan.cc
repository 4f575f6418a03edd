#include "ReadPlan.h"

#include <tensorlane/Failure.h>

namespace tensorlane::nixl {

namespace {

/** a * b, or a Protocol failure on overflow (a hostile shape must not wrap around a bounds check). */
uint64_t mul(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw Failure(FailureCode::Protocol, what + " overflows");
  return out;
}

uint64_t add(uint64_t a, uint64_t b, const std::string& what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw Failure(FailureCode::Protocol, what + " overflows");
  return out;
}

}  // namespace

ReadPlan::ReadPlan(std::string agent, std::string blob, uint64_t epoch, std::vector<RemoteRegion> regions, std::vector<RemoteTensor> remote,
                   std::vector<LocalTensor> local)
    : agent_(std::move(agent)), blob_(std::move(blob)), epoch_(epoch), regions_(std::move(regions)), local_(std::move(local)) {
  // NIXL takes agent names as C strings: one cut short at a NUL would name another agent.
  if (agent_.empty() || agent_.find('\0') != std::string::npos) throw Failure(FailureCode::Protocol, "the metadata's agent name is empty or holds a NUL");
  if (remote.size() != local_.size()) {
    throw Failure(FailureCode::Protocol, "the metadata describes " + std::to_string(remote.size()) + " tensors, the object has " +
                                             std::to_string(local_.size()));
  }
  for (const RemoteRegion& r : regions_) {
    if (r.length == 0) throw Failure(FailureCode::Protocol, "the metadata declares an empty region");
    add(r.address, r.length, "a declared region's end");
  }
  descs_ = MetadataBlob::check(blob_, agent_, regions_);
  for (size_t i = 0; i < remote.size(); i++) plan(remote[i], local_[i], i);
}

void ReadPlan::plan(const RemoteTensor& remote, const LocalTensor& local, size_t index) {
  const std::string which = "tensor " + std::to_string(index);
  if (remote.shape.size() != remote.strides.size()) throw Failure(FailureCode::Protocol, which + " has " + std::to_string(remote.shape.size()) + " dimensions but " + std::to_string(remote.strides.size()) + " strides");
  if (remote.itemSize == 0 || remote.itemSize > 16) throw Failure(FailureCode::Protocol, which + " has an invalid element size");
  uint64_t numel = 1;
  for (uint64_t d : remote.shape) numel = mul(numel, d, which + "'s element count");
  const uint64_t nbytes = mul(numel, remote.itemSize, which + "'s byte length");
  if (nbytes != local.nbytes) {
    throw Failure(FailureCode::Protocol, which + " is " + std::to_string(nbytes) + " bytes at the producer, " + std::to_string(local.nbytes) + " here");
  }
  // An empty tensor reads nothing and needs no region.
  if (numel == 0) return;
  if (remote.region >= regions_.size()) throw Failure(FailureCode::Protocol, which + " names region " + std::to_string(remote.region) + ", which the metadata does not declare");
  // The bytes a view touches run from its first element to its last (strides are non-negative):
  // the whole extent must lie inside the declared region, checked before any descriptor exists.
  uint64_t last = 0;
  for (size_t d = 0; d < remote.shape.size(); d++) {
    last = add(last, mul(remote.shape[d] - 1, remote.strides[d], which + "'s extent"), which + "'s extent");
  }
  const uint64_t end = add(remote.offset, add(mul(last, remote.itemSize, which + "'s extent"), remote.itemSize, which + "'s extent"), which + "'s extent");
  const RemoteRegion& region = regions_[remote.region];
  if (end > region.length) {
    throw Failure(FailureCode::Protocol, which + " reaches byte " + std::to_string(end) + " of a region of " + std::to_string(region.length) +
                                             " bytes: the producer's descriptor lies outside what it registered");
  }
  // Runs: the longest suffix of dimensions laid out contiguously is read in one descriptor each.
  size_t dims = remote.shape.size();
  uint64_t runElements = 1;
  size_t split = dims;
  while (split > 0 && (remote.shape[split - 1] == 1 || remote.strides[split - 1] == runElements)) {
    runElements *= remote.shape[split - 1];
    split--;
  }
  const uint64_t runBytes = runElements * remote.itemSize;
  const uint64_t runs = numel / runElements;
  if (spans_.size() + runs > kMaxSpans) {
    throw Failure(FailureCode::Usage, which + " is a strided view of " + std::to_string(runs) +
                                          " separate runs, more than NIXL should post at once: return tensor.contiguous() from the producer");
  }
  std::vector<uint64_t> position(split, 0);
  uintptr_t local_at = local.address;
  for (uint64_t r = 0; r < runs; r++) {
    uint64_t elementOffset = 0;
    for (size_t d = 0; d < split; d++) elementOffset += position[d] * remote.strides[d];
    Span span;
    span.remote = region.address + remote.offset + elementOffset * remote.itemSize;
    span.local = local_at;
    span.length = runBytes;
    span.remoteMem = region.mem;
    span.remoteDevice = region.device;
    span.localMem = local.mem;
    span.localDevice = local.device;
    span.region = remote.region;
    span.localStorage = local.storageAddress;
    // Adjacent runs (remote and local both continuing the previous one, inside the same registrations) share one descriptor.
    Span* previous = spans_.empty() ? nullptr : &spans_.back();
    if (previous != nullptr && previous->remote + previous->length == span.remote && previous->local + previous->length == span.local &&
        previous->region == span.region && previous->localStorage == span.localStorage && previous->remoteMem == span.remoteMem &&
        previous->localMem == span.localMem && previous->remoteDevice == span.remoteDevice && previous->localDevice == span.localDevice) {
      previous->length += runBytes;
    } else {
      spans_.push_back(span);
    }
    local_at += runBytes;
    for (size_t d = split; d-- > 0;) {
      if (++position[d] < remote.shape[d]) break;
      position[d] = 0;
    }
  }
}

}  // namespace tensorlane::nixl
