#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tensorlane::gloo {

// The gloo slots of one object's transfer, derived from its id alone so that the producer and the
// consumer agree without talking: a 64-bit FNV-1a hash of the id, and slots under two prefixes that
// gloo's own collectives (prefixes 0x01..0x08) never use. Concurrent transfers of one object to one
// consumer share slots; gloo matches them in order and they carry the same bytes.
class TransferKey {
 public:
  explicit TransferKey(const std::string& objectId);

  uint64_t value() const { return value_; }
  uint64_t headerSlot() const;
  uint64_t dataSlot(size_t index) const;

  // The slot where the ranks of the collective whose first tag is `tag` compare what they pass
  // (CollectiveJob), under a third prefix of its own.
  static uint64_t agreementSlot(uint32_t tag) { return kAgreementPrefix | tag; }

 private:
  static constexpr uint64_t kHeaderPrefix = 0xE0ull << 56;
  static constexpr uint64_t kDataPrefix = 0xE1ull << 56;
  static constexpr uint64_t kAgreementPrefix = 0xE2ull << 56;
  static constexpr uint64_t kSlotMask = (1ull << 56) - 1;

  uint64_t value_;
};

}  // namespace tensorlane::gloo
