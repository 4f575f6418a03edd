#pragma once

#include <sys/socket.h>

#include <optional>
#include <vector>

namespace tensorlane::gloo {

// A connected socket's two ends.
struct Ends {
  sockaddr_storage self;
  sockaddr_storage peer;
};

// The ends of `fd`; nullopt unless it is a connected socket.
std::optional<Ends> endsOf(int fd);

// Whether two IPv4 or IPv6 socket addresses name the same host address, ports aside.
bool sameHost(const sockaddr_storage& a, const sockaddr_storage& b);

// Whether they name the same address and port.
bool sameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b);

// gloo's rule for the two ends of a TCP pair (tcp::Pair::connect): of two listening addresses of one
// family, the one that sorts lower (host address bytes, then the port as stored) accepts the
// connection and the other makes it. True when `self` is the accepting end.
bool listensFor(const sockaddr_storage& self, const sockaddr_storage& peer);

// For each of `locals`, the process's connected socket whose local address and port it is (-1 when
// there is none), in one pass over the process's descriptors. gloo's TCP pair tells its socket's local
// address but not the socket; that address is the pair's own (the listening side's accepted socket
// keeps the port only that pair listened on).
std::vector<int> connectedSocketsAt(const std::vector<sockaddr_storage>& locals);

}  // namespace tensorlane::gloo
