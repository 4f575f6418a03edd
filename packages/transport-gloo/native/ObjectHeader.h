#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tensorlane::gloo {

// What a producer announces before the bytes of an object: the object's key, the tensor count,
// the total byte count and a digest of every tensor's length. The consumer posts its receives only
// once this matches what it expects, because gloo's TCP pair aborts the process when a message is
// longer than the receive posted for it, and silently leaves a short one partly unwritten.
// Fixed size, so that the header itself can never be of the wrong length.
//
// An object of at most kInlineMax bytes travels inside the header's message, right after it: one
// exchange instead of two (each is a notification round trip between the pair's device threads).
// The consumer's receive has room for the largest inline payload whatever it expects, so that no
// sender can overrun it, and it copies the payload out only once the header matches.
class ObjectHeader {
 public:
  static constexpr size_t kSize = 32;
  static constexpr size_t kInlineMax = 64 << 10;
  using Bytes = std::array<char, kSize>;

  ObjectHeader(uint64_t key, const std::vector<size_t>& lengths);

  const Bytes& bytes() const { return bytes_; }
  uint64_t total() const { return total_; }
  bool inlined() const { return total_ <= kInlineMax; }

  // Failure(Protocol) naming the first field that differs from this (expected) header; `received`
  // holds at least kSize bytes.
  void check(const char* received, const std::string& objectId) const;

 private:
  static constexpr uint32_t kMagic = 0x48474c54;  // "TLGH"

  Bytes bytes_;
  uint64_t total_;
};

}  // namespace tensorlane::gloo
