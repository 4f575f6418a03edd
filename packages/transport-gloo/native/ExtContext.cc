#include "ExtContext.h"

#include "Sockets.h"

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tlgloo {

namespace {

int newEventFd() {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw Failure(Failure::Kind::Io, std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

}  // namespace

ExtContext::ExtContext(int rank, int size, std::chrono::milliseconds timeout) : gloo::Context(rank, size), abort_(newEventFd()) {
  setTimeout(timeout);
}

ExtContext::~ExtContext() {
  ::close(abort_);
}

std::vector<std::vector<char>> ExtContext::createPairs(const std::shared_ptr<gloo::transport::Device>& device) {
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
  if (listener == nullptr) throw Failure(Failure::Kind::Closed, "the group was destroyed while it connected");
  auto& pair = transportContext_->getPair(peer);
  const std::string name = "rank " + std::to_string(peer);
  const auto self = gloo::transport::tcp::Address(pair->address().bytes()).getSockaddr();
  if (listensFor(self, gloo::transport::tcp::Address(address).getSockaddr())) {
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
    if (peer != rank && pair != nullptr) locals[peer] = gloo::transport::tcp::Address(pair->address().bytes()).getSockaddr();
  }
  return connectedSocketsAt(locals);
}

void ExtContext::closePairs() {
  const uint64_t one = 1;
  // First, so that a connect holding a pair's lock lets go of it. (Adding 1 to an eventfd fails
  // only near a count of 2^64.)
  [[maybe_unused]] const ssize_t written = write(abort_, &one, sizeof(one));
  if (transportContext_ != nullptr) {
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

}  // namespace tlgloo
