#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tlgloo {

// What a producer announces before the bytes of an object: the object's key, the tensor count,
// the total byte count and a digest of every tensor's length. The consumer posts its receives only
// once this matches what it expects, because gloo's TCP pair aborts the process when a message is
// longer than the receive posted for it, and silently leaves a short one partly unwritten.
// Fixed size, so that the header itself can never be of the wrong length.
class ObjectHeader {
 public:
  static constexpr size_t kSize = 32;
  using Bytes = std::array<char, kSize>;

  ObjectHeader(uint64_t key, const std::vector<size_t>& lengths);

  const Bytes& bytes() const { return bytes_; }

  // Failure(Protocol) naming the first field that differs from this (expected) header.
  void check(const Bytes& received, const std::string& objectId) const;

 private:
  static constexpr uint32_t kMagic = 0x48474c54;  // "TLGH"

  Bytes bytes_;
};

}  // namespace tlgloo
