#include "Segment.h"

#include "BusGuard.h"

#include <tensorlane/Failure.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

namespace tensorlane::symmetric {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'S', 'Y', 'M', 'H', 'P', '1'};
constexpr size_t kTokenChars = 32;

struct Header {
  char magic[8];
  char token[kTokenChars];
  uint64_t dataBytes;
  /** How many openers mapped the segment so far (lock-free, so it works across processes). */
  std::atomic<uint32_t> openers;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the openers counter must be lock-free to be shared between processes");
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit its page");

std::string freshToken() {
  unsigned char raw[kTokenChars / 2];
  size_t got = 0;
  while (got < sizeof(raw)) {
    ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw systemFailure("getrandom");
    }
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char c : raw) {
    token.push_back(hex[c >> 4]);
    token.push_back(hex[c & 15]);
  }
  return token;
}

void checkName(const std::string& name) {
  // POSIX names are "/" then up to NAME_MAX characters without another "/".
  if (name.size() < 2 || name.size() > 250 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    throw Failure(FailureCode::Usage, "\"" + name + "\" is not a shared-memory name (\"/\" then up to 249 characters, no other \"/\")");
  }
}

}  // namespace

Segment::Segment(int fd, uint8_t* base, size_t mappedBytes, uint64_t dataBytes, std::string token, bool writable)
    : fd_(fd), base_(base), mappedBytes_(mappedBytes), dataBytes_(dataBytes), token_(std::move(token)), writable_(writable) {}

Segment::~Segment() {
  munmap(base_, mappedBytes_);
  close(fd_);
}

bool Segment::contains(const uint8_t* address, size_t length) const {
  const uint8_t* begin = data();
  return address >= begin && static_cast<uint64_t>(address - begin) <= dataBytes_ &&
         length <= dataBytes_ - static_cast<uint64_t>(address - begin);
}

std::shared_ptr<Segment> Segment::create(const std::string& name, uint64_t dataBytes) {
  checkName(name);
  if (dataBytes > (uint64_t{1} << 46)) throw Failure(FailureCode::Usage, "a segment of " + std::to_string(dataBytes) + " bytes is too large");
  // Drawn before anything is opened: from here on, every failure undoes what it opened.
  std::string token = freshToken();
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw systemFailure("shm_open(" + name + ", O_CREAT | O_EXCL)");
  const size_t mapped = kHeaderBytes + dataBytes;
  // The file is sparse: tmpfs pages are taken when first touched, not here.
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    Failure failure = systemFailure("ftruncate(" + name + ", " + std::to_string(mapped) + ")");
    close(fd);
    shm_unlink(name.c_str());
    throw failure;
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Failure failure = systemFailure("mmap of " + name);
    close(fd);
    shm_unlink(name.c_str());
    throw failure;
  }
  Header* header = static_cast<Header*>(base);
  std::memcpy(header->token, token.data(), kTokenChars);
  header->dataBytes = dataBytes;
  header->openers.store(0);
  std::memcpy(header->magic, kMagic, sizeof(kMagic));
  return std::shared_ptr<Segment>(new Segment(fd, static_cast<uint8_t*>(base), mapped, dataBytes, token, true));
}

std::shared_ptr<Segment> Segment::mapExisting(int fd, const std::string& what, const std::string& token, bool writable) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Failure failure = systemFailure("fstat of " + what);
    close(fd);
    throw failure;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    throw Failure(FailureCode::Protocol, what + " is no tensorlane segment (not a shared memory file)");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes) {
    close(fd);
    throw Failure(FailureCode::Protocol, what + " is no tensorlane segment (" + std::to_string(size) + " bytes)");
  }
  void* base = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Failure failure = systemFailure("mmap of " + what);
    close(fd);
    throw failure;
  }
  // Read under the SIGBUS guard (the file may have shrunk since fstat): magic, token and size.
  uint8_t header[offsetof(Header, openers)];
  uint64_t dataBytes = 0;
  const bool read = copyGuarded(header, static_cast<const uint8_t*>(base), sizeof(header));
  if (read) std::memcpy(&dataBytes, header + offsetof(Header, dataBytes), sizeof(dataBytes));
  if (!read || std::memcmp(header + offsetof(Header, magic), kMagic, sizeof(kMagic)) != 0 || dataBytes != size - kHeaderBytes ||
      token.size() != kTokenChars || std::memcmp(header + offsetof(Header, token), token.data(), kTokenChars) != 0) {
    munmap(base, size);
    close(fd);
    throw Failure(FailureCode::Protocol, what + " is not the segment described (magic, size or token differ)");
  }
  return std::shared_ptr<Segment>(new Segment(fd, static_cast<uint8_t*>(base), size, size - kHeaderBytes, token, writable));
}

std::shared_ptr<Segment> Segment::openByName(const std::string& name, const std::string& token, bool writable) {
  checkName(name);
  int fd = shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
  if (fd < 0) throw systemFailure("shm_open(" + name + ")");
  return mapExisting(fd, name, token, writable);
}

std::shared_ptr<Segment> Segment::openByPid(int64_t pid, int64_t fd, const std::string& token) {
  if (pid <= 0 || pid > 4194304 || fd < 0 || fd > 1048576) {
    throw Failure(FailureCode::Protocol, "pid " + std::to_string(pid) + " / fd " + std::to_string(fd) + " is out of range");
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  // A peer's fd may name a FIFO (whose open would wait for a writer on the JS thread) or a device
  // (whose open may do anything): only a regular file is opened, and without blocking, in case the
  // fd changed in between (mapExisting checks again).
  struct stat named;
  if (stat(path.c_str(), &named) != 0) throw systemFailure("stat(" + path + ")");
  if (!S_ISREG(named.st_mode)) throw Failure(FailureCode::Protocol, path + " is no tensorlane segment (not a shared memory file)");
  int opened = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (opened < 0) throw systemFailure("open(" + path + ")");
  return mapExisting(opened, path, token, false);
}

bool Segment::reserve(uint64_t offset, uint64_t length) {
  if (!writable_) throw Failure(FailureCode::Usage, "a peer's segment is read only: it cannot be reserved");
  if (offset > dataBytes_ || length > dataBytes_ - offset) {
    throw Failure(FailureCode::Usage, "a reservation of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                                          " leaves the segment's " + std::to_string(dataBytes_) + " bytes");
  }
  if (length == 0) return true;
  int rc;
  do {
    rc = posix_fallocate(fd_, static_cast<off_t>(kHeaderBytes + offset), static_cast<off_t>(length));
  } while (rc == EINTR);
  if (rc == ENOSPC) return false;
  if (rc != 0) {
    errno = rc;
    throw systemFailure("posix_fallocate of " + std::to_string(length) + " bytes");
  }
  return true;
}

uint32_t Segment::countOpener() {
  return reinterpret_cast<Header*>(base_)->openers.fetch_add(1) + 1;
}

void Segment::unlink(const std::string& name) {
  checkName(name);
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) throw systemFailure("shm_unlink(" + name + ")");
}

}  // namespace tensorlane::symmetric
