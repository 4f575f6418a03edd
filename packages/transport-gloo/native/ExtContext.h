#pragma once

#include "PairGuard.h"

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace tlgloo {

// A gloo context connected in two phases through tensorlane's control plane instead of a gloo
// rendezvous store: createPairs() gives this rank's address for each peer, connectPeer() takes the
// address that peer made for this rank. gloo::Context keeps its transport members protected, so
// this subclass is the way in (gloo's own rendezvous::Context does the same).
class ExtContext : public gloo::Context {
 public:
  ExtContext(int rank, int size, std::chrono::milliseconds timeout);
  ~ExtContext() override;

  // Addresses by peer rank; the entry of this rank is empty. Each pair's listening socket is the
  // PairGuard's.
  std::vector<std::vector<char>> createPairs(const std::shared_ptr<gloo::transport::Device>& device);

  // Blocks until the TCP connection to `peer` is up (both sides call it) with the process that
  // proved `proofs.expected`, and this side proved `proofs.sent`; Failure (or gloo's error) when the
  // deadline passes, the context's own timeout does, or closePairs() ends it.
  void connectPeer(int peer, const std::vector<char>& address, const PairProofs& proofs, Deadline deadline);

  // The TCP socket of the pair with each peer, by rank, once connectPeer() returned; -1 for this
  // rank and for a pair without one.
  std::vector<int> sockets();

  // Closes every pair: the device stops reading and writing for this context, and a connect in
  // progress returns.
  void closePairs();

  // Keeps a context whose connect did not complete alive for the life of the process: gloo's TCP
  // listener keeps callbacks into its pairs that a late connection from the peer would still call.
  static void park(std::shared_ptr<ExtContext> context);

 private:
  // An eventfd that closePairs() signals: a wait of connectPeer() on the guard returns.
  const int abort_;
  std::mutex listenersMutex_;
  // Each pair's listening socket until its connectPeer() is done (by peer rank).
  std::vector<std::shared_ptr<PairGuard::Listener>> listeners_;
};

}  // namespace tlgloo
