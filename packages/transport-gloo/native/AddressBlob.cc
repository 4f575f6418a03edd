#include "AddressBlob.h"

#include "PairGuard.h"

#include <tensorlane/Failure.h>

#include <gloo/transport/tcp/address.h>

#include <sys/socket.h>

#include <string>

namespace tensorlane::gloo {

namespace {

void put32(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 4; i++) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

[[noreturn]] void fail(int owner, const std::string& why) {
  throw Failure(FailureCode::Protocol, "malformed gloo address blob from rank " + std::to_string(owner) + ": " + why);
}

// Reads the blob front to back: every read is checked against what is left.
void need(size_t length, size_t offset, size_t count, int owner, const char* what) {
  if (count > length - offset) fail(owner, std::string("truncated at byte ") + std::to_string(offset) + " (reading " + what + ")");
}

uint32_t read32(const uint8_t* data, size_t length, size_t& offset, int owner, const char* what) {
  need(length, offset, 4, owner, what);
  uint32_t value = 0;
  for (int i = 0; i < 4; i++) value |= static_cast<uint32_t>(data[offset + i]) << (8 * i);
  offset += 4;
  return value;
}

}  // namespace

std::vector<uint8_t> AddressBlob::pack(int rank, int size, const std::vector<uint8_t>& secret, const std::vector<std::vector<char>>& addresses) {
  std::vector<uint8_t> out;
  put32(out, kMagic);
  put32(out, kVersion);
  put32(out, static_cast<uint32_t>(rank));
  put32(out, static_cast<uint32_t>(size));
  put32(out, static_cast<uint32_t>(secret.size()));
  out.insert(out.end(), secret.begin(), secret.end());
  for (int peer = 0; peer < size; peer++) {
    if (peer == rank) continue;
    put32(out, static_cast<uint32_t>(peer));
    put32(out, static_cast<uint32_t>(addresses[peer].size()));
    out.insert(out.end(), addresses[peer].begin(), addresses[peer].end());
  }
  return out;
}

AddressBlob::Contents AddressBlob::read(const uint8_t* data, size_t length, int owner, int size, int reader) {
  size_t offset = 0;
  const auto u32 = [&](const char* what) { return read32(data, length, offset, owner, what); };
  if (u32("magic") != kMagic) fail(owner, "bad magic (not a tensorlane gloo blob)");
  const uint32_t version = u32("version");
  if (version != kVersion) fail(owner, "version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
  const uint32_t rank = u32("rank");
  if (rank != static_cast<uint32_t>(owner)) fail(owner, "it says it is from rank " + std::to_string(rank));
  const uint32_t worldSize = u32("world size");
  if (worldSize != static_cast<uint32_t>(size)) {
    fail(owner, "world size " + std::to_string(worldSize) + ", the group has " + std::to_string(size));
  }
  const uint32_t secretBytes = u32("secret length");
  const uint32_t expectedSecret = owner == 0 ? PairGuard::kSecretBytes : 0;
  if (secretBytes != expectedSecret) {
    fail(owner, "a secret of " + std::to_string(secretBytes) + " bytes (the blob of rank " + std::to_string(owner) + " carries " +
                    std::to_string(expectedSecret) + ")");
  }
  need(length, offset, secretBytes, owner, "secret");
  Contents contents{{}, std::vector<uint8_t>(data + offset, data + offset + secretBytes)};
  offset += secretBytes;
  std::vector<char>& mine = contents.address;
  for (int peer = 0; peer < size; peer++) {
    if (peer == owner) continue;
    const uint32_t listed = u32("peer rank");
    if (listed != static_cast<uint32_t>(peer)) {
      fail(owner, "entry for rank " + std::to_string(listed) + " where rank " + std::to_string(peer) + " was expected");
    }
    const uint32_t count = u32("address length");
    if (count == 0 || count > kMaxAddressBytes) fail(owner, "address length " + std::to_string(count));
    need(length, offset, count, owner, "address");
    if (peer == reader) mine.assign(data + offset, data + offset + count);
    offset += count;
  }
  if (offset != length) fail(owner, std::to_string(length - offset) + " unexpected trailing bytes");
  // Checked here rather than trusting gloo's Address constructor with foreign bytes.
  const size_t expected = ::gloo::transport::tcp::Address().bytes().size();
  if (mine.size() != expected) {
    fail(owner, "the address for rank " + std::to_string(reader) + " has " + std::to_string(mine.size()) + " bytes, a gloo TCP address has " +
                    std::to_string(expected));
  }
  const int family = ::gloo::transport::tcp::Address(mine).getSockaddr().ss_family;
  if (family != AF_INET && family != AF_INET6) fail(owner, "address family " + std::to_string(family) + " for rank " + std::to_string(reader));
  return contents;
}

}  // namespace tensorlane::gloo
