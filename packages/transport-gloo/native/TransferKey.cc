#include "TransferKey.h"

namespace tensorlane::gloo {

TransferKey::TransferKey(const std::string& objectId) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : objectId) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  value_ = hash;
}

uint64_t TransferKey::headerSlot() const {
  return kHeaderPrefix | (value_ & kSlotMask);
}

uint64_t TransferKey::dataSlot(size_t index) const {
  return kDataPrefix | ((value_ + index) & kSlotMask);
}

}  // namespace tensorlane::gloo
