#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tensorlane::gloo {

// The one blob a rank contributes to the group's all-gather: the address of each of its pairs, one
// per peer, and from rank 0 the group's secret (PairGuard), which reaches the other members through
// the control plane only. Layout (little endian): magic "TLGA", version, owner rank, world size,
// secret length (PairGuard::kSecretBytes for rank 0, else 0), the secret, then for every peer in
// increasing rank order: peer rank, byte length, address bytes. Nothing may follow.
class AddressBlob {
 public:
  static std::vector<uint8_t> pack(int rank, int size, const std::vector<uint8_t>& secret, const std::vector<std::vector<char>>& addresses);

  struct Contents {
    // The address that the blob's owner made for the reader.
    std::vector<char> address;
    // The group's secret: empty unless the owner is rank 0.
    std::vector<uint8_t> secret;
  };

  // What `owner`'s blob holds for `reader`; Failure(Protocol) naming the defect for a blob that does
  // not follow the layout or does not describe this group (never reads out of bounds).
  static Contents read(const uint8_t* data, size_t length, int owner, int size, int reader);

 private:
  static constexpr uint32_t kMagic = 0x41474c54;  // "TLGA"
  static constexpr uint32_t kVersion = 2;
  // A gloo TCP address is a sockaddr_storage and a sequence number; anything far larger is not one.
  static constexpr uint32_t kMaxAddressBytes = 1024;
};

}  // namespace tensorlane::gloo
