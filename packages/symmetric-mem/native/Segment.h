// One POSIX shared-memory segment mapped into this process. Layout: a header page (magic, a random
// token that names this segment's incarnation, the data size), then the data. The token lets an
// opener prove that the file it opened is the segment it was told about (a pid/fd pair can be
// reused, a name can be recreated). The mapping and its fd live until the last owner lets go:
// JS SharedArrayBuffers over the data hold a shared_ptr, so unmapping never races a reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tensorlane::symmetric {

constexpr size_t kHeaderBytes = 4096;

class Segment {
 public:
  /** shm_open(O_CREAT | O_EXCL) of `name`, sized to hold `dataBytes`, with a fresh token. */
  static std::shared_ptr<Segment> create(const std::string& name, uint64_t dataBytes);
  /** shm_open of an existing `name`, checked against `token`. */
  static std::shared_ptr<Segment> openByName(const std::string& name, const std::string& token, bool writable);
  /** Another process's open segment through /proc/<pid>/fd/<fd> (works after the name is unlinked). */
  static std::shared_ptr<Segment> openByPid(int64_t pid, int64_t fd, const std::string& token);
  /** shm_unlink; a name already gone is not an error. */
  static void unlink(const std::string& name);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  uint8_t* data() const { return base_ + kHeaderBytes; }
  uint64_t dataBytes() const { return dataBytes_; }
  const std::string& token() const { return token_; }
  int fd() const { return fd_; }
  bool writable() const { return writable_; }
  /** Counts one more opener in the header; returns how many have opened it (this one included). */
  uint32_t countOpener();
  /**
   * Takes the tmpfs pages of [offset, offset + length) of the data now (posix_fallocate), so that a
   * full file system shows here, as false (ENOSPC), instead of as a SIGBUS at first touch.
   */
  bool reserve(uint64_t offset, uint64_t length);
  /** Whether [address, address + length) lies in the data of this segment. */
  bool contains(const uint8_t* address, size_t length) const;

 private:
  Segment(int fd, uint8_t* base, size_t mappedBytes, uint64_t dataBytes, std::string token, bool writable);
  static std::shared_ptr<Segment> mapExisting(int fd, const std::string& what, const std::string& token, bool writable);

  int fd_;
  uint8_t* base_;
  size_t mappedBytes_;
  uint64_t dataBytes_;
  std::string token_;
  bool writable_;
};

}  // namespace tensorlane::symmetric
