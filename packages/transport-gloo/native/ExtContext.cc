#include "ExtContext.h"

#include "Device.h"

#include "Sockets.h"

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace tensorlane::gloo {

namespace {

int newEventFd() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw Failure(FailureCode::Io, std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

}  // namespace

ExtContext::ExtContext(int rank, int size, std::chrono::milliseconds timeout) : ::gloo::Context(rank, size), abort_(newEventFd()) {
  setTimeout(timeout);
}

ExtContext::~ExtContext() {
  ::close(abort_);
}

std::vector<std::vector<char>> ExtContext::createPairs(const std::shared_ptr<::gloo::transport::Device>& device) {
  device_ = device;
  transportContext_ = device->createContext(rank, size);
  transportContext_->setTimeout(getTimeout());
  std::vector<std::vector<char>> addresses(size);
  std::vector<std::shared_ptr<PairGuard::Listener>> listeners(size);
  for (int peer = 0; peer < size; peer++) {
    if (peer == rank) continue;
    PairGuard::Capture capture;
    addresses[peer] = transportContext_->createPair(peer)->address().bytes();
    listeners[peer] = capture.take();
  }
  std::lock_guard<std::mutex> lock(listenersMutex_);
  listeners_ = std::move(listeners);
  return addresses;
}

void ExtContext::connectPeer(int peer, const std::vector<char>& address, const PairProofs& proofs, Deadline deadline) {
  std::shared_ptr<PairGuard::Listener> listener;
  {
    std::lock_guard<std::mutex> lock(listenersMutex_);
    if (static_cast<size_t>(peer) < listeners_.size()) listener = listeners_[peer];
  }
  if (listener == nullptr) throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
  auto& pair = transportContext_->getPair(peer);
  const std::string name = "rank " + std::to_string(peer);
  const auto self = ::gloo::transport::tcp::Address(pair->address().bytes()).getSockaddr();
  if (listensFor(self, ::gloo::transport::tcp::Address(address).getSockaddr())) {
    PairGuard::admit(listener, proofs, deadline, abort_, name);
    pair->connect(address);
  } else {
    PairGuard::Handshake handshake(proofs, deadline, abort_, name);
    try {
      pair->connect(address);
    } catch (const std::exception&) {
      if (handshake.failure().has_value()) throw *handshake.failure();
      throw;
    }
  }
  std::lock_guard<std::mutex> lock(listenersMutex_);
  if (static_cast<size_t>(peer) < listeners_.size()) listeners_[peer] = nullptr;
}

std::vector<int> ExtContext::sockets() {
  // A connected pair's address is its socket's local address (gloo resets it on connecting).
  std::vector<sockaddr_storage> locals(size);
  for (int peer = 0; peer < size; peer++) {
    const auto& pair = transportContext_->getPair(peer);
    if (peer != rank && pair != nullptr) locals[peer] = ::gloo::transport::tcp::Address(pair->address().bytes()).getSockaddr();
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
  const uint64_t one = 1;
  // First, so that a connect holding a pair's lock lets go of it. (Adding 1 to an eventfd fails
  // only near a count of 2^64.)
  [[maybe_unused]] const ssize_t written = write(abort_, &one, sizeof(one));
  if (transportContext_ != nullptr) {
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
    const Device::Ticking ticking;
    for (int peer = 0; peer < size; peer++) {
      if (peer == rank) continue;
      auto& pair = transportContext_->getPair(peer);
      if (pair != nullptr) pair->close();
    }
  }
  std::lock_guard<std::mutex> lock(listenersMutex_);
  listeners_.clear();
}

void ExtContext::park(std::shared_ptr<ExtContext> context) {
  static std::mutex mutex;
  // Never destroyed, not even at exit: the device's loop thread may outlive static destructors.
  static std::vector<std::shared_ptr<ExtContext>>* parked = new std::vector<std::shared_ptr<ExtContext>>();
  std::lock_guard<std::mutex> lock(mutex);
  parked->push_back(std::move(context));
}

}  // namespace tensorlane::gloo
