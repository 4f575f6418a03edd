#include "Sockets.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace tensorlane::gloo {

namespace {

int portOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(address).sin_port;
  if (address.ss_family == AF_INET6) return reinterpret_cast<const sockaddr_in6&>(address).sin6_port;
  return -1;
}

}  // namespace

std::optional<Ends> endsOf(int fd) {
  Ends ends{};
  socklen_t selfLength = sizeof(ends.self);
  socklen_t peerLength = sizeof(ends.peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ends.self), &selfLength) != 0) return std::nullopt;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ends.peer), &peerLength) != 0) return std::nullopt;
  return ends;
}

bool sameHost(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a).sin_addr;
    const auto& y = reinterpret_cast<const sockaddr_in&>(b).sin_addr;
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b).sin6_addr;
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  }
  return false;
}

bool sameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  return sameHost(a, b) && portOf(a) == portOf(b);
}

bool listensFor(const sockaddr_storage& self, const sockaddr_storage& peer) {
  if (self.ss_family != peer.ss_family) return false;
  int order = 0;
  if (self.ss_family == AF_INET) {
    order = std::memcmp(&reinterpret_cast<const sockaddr_in&>(self).sin_addr, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, sizeof(in_addr));
  } else if (self.ss_family == AF_INET6) {
    order = std::memcmp(&reinterpret_cast<const sockaddr_in6&>(self).sin6_addr, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr,
                        sizeof(in6_addr));
  } else {
    return false;
  }
  return order < 0 || (order == 0 && portOf(self) < portOf(peer));
}

std::vector<int> connectedSocketsAt(const std::vector<sockaddr_storage>& locals) {
  std::vector<int> found(locals.size(), -1);
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    const std::optional<Ends> ends = endsOf(fd);
    if (!ends.has_value()) continue;
    for (size_t i = 0; i < locals.size(); i++) {
      if (found[i] < 0 && sameEndpoint(ends->self, locals[i])) found[i] = fd;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace tensorlane::gloo
