#include "MetadataBlob.h"

#include <tensorlane/Failure.h>

#include <cstring>

namespace tensorlane::nixl {

namespace {

constexpr size_t kMaxConns = 16;
constexpr size_t kMaxSections = 64;
constexpr uint64_t kMaxDescs = 1u << 22;

class Reader {
 public:
  explicit Reader(const std::string& blob) : blob_(blob) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw Failure(FailureCode::Protocol, "malformed NIXL metadata at byte " + std::to_string(at_) + ": " + why);
  }

  void expectLiteral(const char* literal) {
    size_t n = strlen(literal);
    if (blob_.size() - at_ < n || blob_.compare(at_, n, literal) != 0) fail(std::string("expected \"") + literal + "\"");
    at_ += n;
  }

  bool startsWith(const char* tag) const {
    size_t n = strlen(tag);
    return blob_.size() - at_ >= n + 8 && blob_.compare(at_, n, tag) == 0;
  }

  /** One record with this tag: its bytes (bounded by `maxLength`). */
  std::string record(const char* tag, uint64_t maxLength) {
    expectLiteral(tag);
    if (blob_.size() - at_ < 8) fail(std::string("record \"") + tag + "\" is truncated");
    uint64_t length = 0;
    memcpy(&length, blob_.data() + at_, 8);
    at_ += 8;
    if (length > maxLength || length > blob_.size() - at_ - 1 || blob_.size() - at_ < 1) {
      fail(std::string("record \"") + tag + "\" claims " + std::to_string(length) + " bytes");
    }
    std::string data = blob_.substr(at_, length);
    at_ += length;
    if (blob_[at_] != '|') fail(std::string("record \"") + tag + "\" is not terminated");
    at_++;
    return data;
  }

  uint64_t count(const char* tag, uint64_t max) {
    std::string data = record(tag, 8);
    if (data.size() != 8) fail(std::string("count \"") + tag + "\" is not 8 bytes");
    uint64_t value = 0;
    memcpy(&value, data.data(), 8);
    if (value > max) fail(std::string("count \"") + tag + "\" is " + std::to_string(value));
    return value;
  }

  bool done() const { return at_ == blob_.size(); }

 private:
  const std::string& blob_;
  size_t at_ = 0;
};

}  // namespace

std::vector<RemoteDesc> MetadataBlob::check(const std::string& blob, const std::string& agent, const std::vector<RemoteRegion>& regions) {
  Reader reader(blob);
  reader.expectLiteral("nixlSerDes|");
  std::string name = reader.record("Agent", 4096);
  if (name != agent) throw Failure(FailureCode::Protocol, "NIXL metadata of agent \"" + name + "\" travels as agent \"" + agent + "\"");
  uint64_t conns = reader.count("Conns", kMaxConns);
  for (uint64_t i = 0; i < conns; i++) {
    if (reader.record("t", 256).empty()) reader.fail("empty backend name");
    if (reader.record("c", 1 << 20).empty()) reader.fail("empty connection info");
  }
  if (reader.record("", 64) != "MemSection") reader.fail("expected the memory section");
  std::vector<RemoteDesc> descs;
  uint64_t sections = reader.count("nixlSecElms", kMaxSections);
  for (uint64_t s = 0; s < sections; s++) {
    if (reader.record("bknd", 256).empty()) reader.fail("empty backend name");
    if (reader.record("nixlDList", 64) != "nixlSDList") reader.fail("expected a descriptor list");
    std::string kind = reader.record("t", 4);
    if (kind.size() != 4) reader.fail("memory kind is not 4 bytes");
    int32_t mem = 0;
    memcpy(&mem, kind.data(), 4);
    if (mem < 0 || mem > 4) reader.fail("unknown memory kind " + std::to_string(mem));
    uint64_t n = reader.count("n", kMaxDescs);
    for (uint64_t i = 0; i < n; i++) {
      std::string desc = reader.record("", 1 << 16);
      if (desc.size() < 24) reader.fail("descriptor shorter than address, length and device");
      RemoteDesc d;
      memcpy(&d.address, desc.data(), 8);
      memcpy(&d.length, desc.data() + 8, 8);
      memcpy(&d.device, desc.data() + 16, 8);
      d.mem = mem;
      d.key = desc.substr(24);
      descs.push_back(d);
    }
  }
  if (!reader.done()) {
    uint64_t pairs = reader.count("UserMDs", 1 << 16);
    for (uint64_t i = 0; i < pairs; i++) {
      reader.record("k", 1 << 20);
      reader.record("v", 1 << 20);
    }
  }
  if (!reader.done()) reader.fail("trailing bytes");
  for (size_t i = 0; i < regions.size(); i++) {
    const RemoteRegion& r = regions[i];
    bool found = false;
    for (const RemoteDesc& d : descs) {
      if (d.mem == r.mem && d.device == r.device && r.address >= d.address && r.address - d.address <= d.length &&
          r.length <= d.length - (r.address - d.address)) {
        found = true;
        break;
      }
    }
    if (!found) {
      throw Failure(FailureCode::Protocol, "region " + std::to_string(i) + " of the metadata is not registered in the producer's NIXL metadata");
    }
  }
  return descs;
}

}  // namespace tensorlane::nixl
