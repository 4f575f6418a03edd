#include "ExtContext.h"

#include "Sockets.h"

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <thread>

namespace tlgloo {

ExtContext::ExtContext(int rank, int size, std::chrono::milliseconds timeout) : gloo::Context(rank, size) {
  setTimeout(timeout);
}

std::vector<std::vector<char>> ExtContext::createPairs(const std::shared_ptr<gloo::transport::Device>& device) {
  device_ = device;
  transportContext_ = device->createContext(rank, size);
  transportContext_->setTimeout(getTimeout());
  std::vector<std::vector<char>> addresses(size);
  for (int peer = 0; peer < size; peer++) {
    if (peer == rank) continue;
    addresses[peer] = transportContext_->createPair(peer)->address().bytes();
  }
  return addresses;
}

void ExtContext::connectPeer(int peer, const std::vector<char>& address) {
  transportContext_->getPair(peer)->connect(address);
}

std::vector<int> ExtContext::sockets() {
  // A connected pair's address is its socket's local address (gloo resets it on connecting).
  std::vector<sockaddr_storage> locals(size);
  for (int peer = 0; peer < size; peer++) {
    const auto& pair = transportContext_->getPair(peer);
    if (peer != rank && pair != nullptr) locals[peer] = gloo::transport::tcp::Address(pair->address().bytes()).getSockaddr();
  }
  return connectedSocketsAt(locals);
}

std::vector<int> ExtContext::rememberSockets() {
  const std::vector<int> fds = sockets();
  sockets_.assign(size, std::nullopt);
  for (int peer = 0; peer < size; peer++) {
    struct stat info;
    if (fds[peer] >= 0 && fstat(fds[peer], &info) == 0) sockets_[peer] = Socket{fds[peer], info.st_dev, info.st_ino};
  }
  return fds;
}

bool ExtContext::names(int fd, const Socket& socket) {
  struct stat info;
  return fstat(fd, &info) == 0 && info.st_dev == socket.device && info.st_ino == socket.inode;
}

bool ExtContext::pairClosed(int peer) {
  if (sockets_.empty() || !sockets_[peer].has_value()) return false;
  return !names(sockets_[peer]->fd, *sockets_[peer]);
}

void ExtContext::closePairs() {
  if (transportContext_ == nullptr) return;
  // gloo's close() wakes no thread waiting on a buffer posted to the pair. A socket shut for reading
  // makes gloo's device thread see the end of the stream instead: it fails every such wait and
  // closes the pair itself (resetting the connection, as close() does: no TIME_WAIT left). Through
  // a duplicate whose inode is checked: gloo may close its descriptor meanwhile, and another socket
  // of the process take its number.
  for (const auto& socket : sockets_) {
    if (!socket.has_value()) continue;
    const int fd = dup(socket->fd);
    if (fd < 0) continue;
    if (names(fd, *socket)) {
      const linger reset{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      shutdown(fd, SHUT_RD);
    }
    ::close(fd);
  }
  // Within a bound: a device thread stuck elsewhere must not hold up the close.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  for (size_t peer = 0; peer < sockets_.size(); peer++) {
    while (sockets_[peer].has_value() && !pairClosed(peer) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (int peer = 0; peer < size; peer++) {
    if (peer == rank) continue;
    auto& pair = transportContext_->getPair(peer);
    if (pair != nullptr) pair->close();
  }
}

void ExtContext::park(std::shared_ptr<ExtContext> context) {
  static std::mutex mutex;
  // Never destroyed, not even at exit: the device's loop thread may outlive static destructors.
  static std::vector<std::shared_ptr<ExtContext>>* parked = new std::vector<std::shared_ptr<ExtContext>>();
  std::lock_guard<std::mutex> lock(mutex);
  parked->push_back(std::move(context));
}

}  // namespace tlgloo
