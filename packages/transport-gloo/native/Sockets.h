#pragma once

#include <sys/socket.h>

namespace tlgloo {

// Whether two IPv4 or IPv6 socket addresses name the same host address, ports aside.
bool sameHost(const sockaddr_storage& a, const sockaddr_storage& b);

// Whether they name the same address and port.
bool sameEndpoint(const sockaddr_storage& a, const sockaddr_storage& b);

// The process's connected socket whose local address and port are `local`; -1 when there is none.
// gloo's TCP pair tells its socket's local address but not the socket; that address is the pair's
// own (the listening side's accepted socket keeps the port only that pair listened on).
int connectedSocketAt(const sockaddr_storage& local);

}  // namespace tlgloo
