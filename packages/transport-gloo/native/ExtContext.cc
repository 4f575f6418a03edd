#include "ExtContext.h"

#include "Sockets.h"

#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>

#include <mutex>

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

void ExtContext::closePairs() {
  if (transportContext_ == nullptr) return;
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
