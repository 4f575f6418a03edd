#include "ObjectHeader.h"

#include <tensorlane/Failure.h>

namespace tensorlane::gloo {

namespace {

void put(ObjectHeader::Bytes& out, size_t offset, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; i++) out[offset + i] = static_cast<char>(value >> (8 * i));
}

uint64_t get(const char* in, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; i++) value |= static_cast<uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  return value;
}

}  // namespace

ObjectHeader::ObjectHeader(uint64_t key, const std::vector<size_t>& lengths) : bytes_{}, total_(0) {
  uint64_t digest = 0xcbf29ce484222325ull;
  for (size_t length : lengths) {
    total_ += length;
    for (size_t i = 0; i < 8; i++) {
      digest ^= (static_cast<uint64_t>(length) >> (8 * i)) & 0xff;
      digest *= 0x100000001b3ull;
    }
  }
  put(bytes_, 0, kMagic, 4);
  put(bytes_, 4, lengths.size(), 4);
  put(bytes_, 8, key, 8);
  put(bytes_, 16, total_, 8);
  put(bytes_, 24, digest, 8);
}

void ObjectHeader::check(const char* received, const std::string& objectId) const {
  const auto fail = [&](const std::string& why) {
    throw Failure(FailureCode::Protocol, "the producer of " + objectId + " announced other data than its metadata describes: " + why);
  };
  if (get(received, 0, 4) != kMagic) fail("bad header magic");
  if (get(received, 8, 8) != get(bytes_.data(), 8, 8)) fail("another object's key (slot collision or stale transfer)");
  if (get(received, 4, 4) != get(bytes_.data(), 4, 4)) {
    fail(std::to_string(get(received, 4, 4)) + " tensors, expected " + std::to_string(get(bytes_.data(), 4, 4)));
  }
  if (get(received, 16, 8) != get(bytes_.data(), 16, 8)) {
    fail(std::to_string(get(received, 16, 8)) + " bytes, expected " + std::to_string(get(bytes_.data(), 16, 8)));
  }
  if (get(received, 24, 8) != get(bytes_.data(), 24, 8)) fail("the tensors' byte lengths differ");
}

}  // namespace tensorlane::gloo
