#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tlgloo {

// The one blob a rank contributes to the group's all-gather: the address of each of its pairs, one
// per peer. Layout (little endian): magic "TLGA", version, owner rank, world size, then for every
// peer in increasing rank order: peer rank, byte length, address bytes. Nothing may follow.
class AddressBlob {
 public:
  static std::vector<uint8_t> pack(int rank, int size, const std::vector<std::vector<char>>& addresses);

  // The address that `owner` made for `reader`; Failure(Protocol) naming the defect for a blob that
  // does not follow the layout or does not describe this group (never reads out of bounds).
  static std::vector<char> addressFor(const uint8_t* data, size_t length, int owner, int size, int reader);

 private:
  static constexpr uint32_t kMagic = 0x41474c54;  // "TLGA"
  static constexpr uint32_t kVersion = 1;
  // A gloo TCP address is a sockaddr_storage and a sequence number; anything far larger is not one.
  static constexpr uint32_t kMaxAddressBytes = 1024;
};

}  // namespace tlgloo
