#pragma once

#include "ExtContext.h"
#include "PinnedBytes.h"

#include <napi.h>

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tlgloo {

class Job;

// One rank's membership of a group, shared by its JS wrapper and the native threads of its jobs.
// Owns the gloo context; knows whether the group still works (a gloo timeout or I/O error poisons
// the whole context, so it is then "broken" until destroyed and created again) and keeps what gloo
// may still touch after an aborted operation until the pairs are closed.
class GroupState {
 public:
  // `owner`: the JS environment that creates (and destroys) the group. `deviceCpusByRank`: if this
  // group opens the process's device, its thread takes this rank's share of the CPUs (Device).
  GroupState(napi_env owner, int rank, int size, std::chrono::milliseconds connectTimeout, bool deviceCpusByRank);
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;

  int rank() const { return rank_; }
  // Whether `env` created the group: memory pinned in another environment (a main thread receiving
  // through a published group) cannot be released from the owner's thread at close().
  bool ownedBy(napi_env env) const { return env == owner_; }
  int size() const { return size_; }

  // This rank's contribution to the all-gather (see AddressBlob).
  const std::vector<uint8_t>& blob() const { return blob_; }

  // What connecting takes from the all-gather, by peer rank: the address the peer made for this
  // rank, and what the two ends of that pair prove to each other (from rank 0's secret).
  struct Rendezvous {
    std::vector<std::vector<char>> addresses;
    std::vector<PairProofs> proofs;
  };

  // JS thread: the rendezvous from every rank's blob; Failure(Protocol) for a malformed one.
  Rendezvous rendezvous(const std::vector<std::vector<uint8_t>>& blobs) const;

  // Native thread: connects every pair (blocking; each waits for its own peer, and drops strangers,
  // up to five times the connect timeout in all), then sizes the send buffer of the sockets to
  // peers on this host (SendBuffer). Failure(Closed) when the group is destroyed meanwhile.
  void connect(const Rendezvous& rendezvous);

  // The send buffer the kernel gives the socket to each peer, by rank (-1 for this rank); empty
  // unless connected and not yet destroyed.
  std::vector<int> sendBuffers();

  // The context an operation runs on; Failure when the group is not connected, broken or destroyed.
  std::shared_ptr<ExtContext> context();

  void markBroken(const std::string& reason);
  std::string brokenReason();

  // JS thread: collective tags, taken in call order so that every rank numbers its collectives alike.
  uint32_t takeTags(uint32_t count);

  void attach(const std::shared_ptr<Job>& job);
  void detach(const Job* job);

  // Posted-but-unfinished buffers of an aborted operation, and memory they point into. Destroying
  // such a buffer wedges its pair (gloo stalls on a message for a vanished buffer), so they live
  // until close(). False (and nothing kept) once the group is closed.
  bool retire(std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>>& buffers, std::vector<std::shared_ptr<void>>& owned);
  // JS thread: the tensor memory of such an operation. False (nothing kept) once closed.
  bool retirePinned(std::vector<PinnedBytes>& pinned);
  // What the retired operations keep until close(): their posted buffers, and the bytes of tensor
  // memory pinned for them.
  struct Stranded {
    size_t operations;
    size_t bytes;
  };
  Stranded stranded();

  // JS thread: aborts running jobs, closes the pairs, then drops what was retired. Idempotent.
  void close();

 private:
  enum class Phase { Created, Connecting, Connected, Closed };

  const napi_env owner_;
  const int rank_;
  const int size_;
  std::shared_ptr<ExtContext> context_;
  // The group's secret, made by rank 0 (empty on the other ranks, which read it from rank 0's blob).
  const std::vector<uint8_t> secret_;
  std::vector<uint8_t> blob_;
  // What connect() asks of the sockets to peers on this host; nullopt: the kernel decides.
  const std::optional<int> sendBufferBytes_;

  std::mutex mutex_;
  Phase phase_ = Phase::Created;
  std::string broken_;
  uint32_t nextTag_ = 1;
  std::vector<std::weak_ptr<Job>> jobs_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> retiredBuffers_;
  // Aborted operations retired: one may leave several buffers posted (a header and its tensors).
  size_t retiredOperations_ = 0;
  std::vector<std::shared_ptr<void>> retiredOwned_;
  std::vector<PinnedBytes> retiredPinned_;
};

}  // namespace tlgloo
