#pragma once

#include "PairGuard.h"

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace tensorlane::gloo {

// A gloo context connected in two phases through tensorlane's control plane instead of a gloo
// rendezvous store: createPairs() gives this rank's address for each peer, connectPeer() takes the
// address that peer made for this rank. gloo::Context keeps its transport members protected, so
// this subclass is the way in (gloo's own rendezvous::Context does the same).
class ExtContext : public ::gloo::Context {
 public:
  ExtContext(int rank, int size, std::chrono::milliseconds timeout);
  ~ExtContext() override;

  // Addresses by peer rank; the entry of this rank is empty. Each pair's listening socket is the
  // PairGuard's.
  std::vector<std::vector<char>> createPairs(const std::shared_ptr<::gloo::transport::Device>& device);

  // Blocks until the TCP connection to `peer` is up (both sides call it) with the process that
  // proved `proofs.expected`, and this side proved `proofs.sent`; Failure (or gloo's error) when the
  // deadline passes, the context's own timeout does, or closePairs() ends it.
  void connectPeer(int peer, const std::vector<char>& address, const PairProofs& proofs, Deadline deadline);

  // The TCP socket of the pair with each peer, by rank, once connectPeer() returned; -1 for this
  // rank and for a pair without one.
  std::vector<int> sockets();

  // Remembers which socket each connected pair reads (descriptor and inode), once connectPeer()
  // returned for every peer, for pairClosed() and closePairs(); returns them as sockets() does.
  std::vector<int> rememberSockets();

  // Whether gloo closed the pair with `peer` (its connection broke: the peer died; or closePairs):
  // it then touches none of the buffers posted to it. False for a pair whose socket is unknown.
  bool pairClosed(int peer);

  // Closes every pair: the device stops reading and writing for this context, a connect in
  // progress returns, and every wait on a buffer posted to a pair ends (gloo's collectives have no
  // other way out).
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

  // A socket as gloo opened it: the descriptor may be closed and its number reused, the inode not.
  struct Socket {
    int fd;
    dev_t device;
    ino_t inode;
  };

  // Whether `fd` still names `socket`.
  static bool names(int fd, const Socket& socket);

  // By peer rank; nullopt for this rank and for a pair whose socket was not found.
  std::vector<std::optional<Socket>> sockets_;
};

}  // namespace tensorlane::gloo
