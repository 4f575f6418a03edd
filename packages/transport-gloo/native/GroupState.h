#pragma once

#include "ExtContext.h"

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tensorlane::gloo {

class Job;

// One rank's membership of a group, shared by its JS wrapper and the native threads of its jobs.
// Owns the gloo context; knows whether the group still works (a gloo timeout or I/O error poisons
// the whole context, so it is then "broken" until destroyed and created again) and keeps what gloo
// may still touch after an aborted operation until it no longer can.
class GroupState {
 public:
  // `deviceCpusByRank`: if this group opens the process's device, its thread takes this rank's
  // share of the CPUs (Device).
  GroupState(int rank, int size, std::chrono::milliseconds connectTimeout, bool deviceCpusByRank);
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;

  int rank() const { return rank_; }
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
  // Whether close() was called.
  bool closed();
  std::string brokenReason();

  // Tags of one collective: the ranks' comparison of what they pass, then one per tensor.
  static constexpr uint32_t kTagsPerCollective = 1 << 16;

  // JS thread: the first of a collective's tags, taken in call order so that every rank numbers its
  // collectives alike; a fixed block each, so that ranks that passed different tensor counts to one
  // collective still agree on the next one's. Wraps after 65536 collectives, all long done by then.
  uint32_t takeTags();

  void attach(const std::shared_ptr<Job>& job);
  void detach(const Job* job);

  // A buffer an operation posted to the pair with `peer` and that gloo had not finished with when
  // the operation ended (it was aborted, or failed).
  struct Posted {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    int peer;
  };

  // Keeps such buffers, and memory of the operation's own (`owned`) that they point into: destroying
  // a posted buffer wedges its pair (gloo stalls on a message for a vanished buffer), and its memory
  // may still be written. They go, and `released` is called (on whichever thread saw it, at most
  // once), as soon as gloo can no longer touch them: once their pairs are closed (the peer died, or
  // the group closed; gloo tells no late completion). `pinnedBytes`: the caller's tensor memory
  // among them.
  void retire(std::vector<Posted> posted, std::vector<std::shared_ptr<void>> owned, size_t pinnedBytes, std::function<void()> released);
  // Lets go of what retired operations keep and gloo no longer touches.
  void sweep();
  // What the retired operations keep: their count, and the bytes of tensor memory among them.
  struct Stranded {
    size_t operations;
    size_t bytes;
  };
  Stranded stranded();

  // JS thread: aborts running jobs, closes the pairs, then drops what was retired. Idempotent.
  void close();

 private:
  enum class Phase { Created, Connecting, Connected, Closed };

  struct Retired {
    std::vector<Posted> posted;
    std::vector<std::shared_ptr<void>> owned;
    size_t pinnedBytes;
    std::function<void()> released;
  };

  // Whether gloo is done with every buffer of `retired` (once true, it stays so).
  bool settled(const Retired& retired);
  // Outside mutex_: destroying a buffer may wait for gloo's device thread.
  static void release(std::vector<Retired> retired);

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
  // Set by close() once the pairs are closed: nothing retired is kept after that.
  bool pairsClosed_ = false;
  std::string broken_;
  uint32_t nextTag_ = 1;
  std::vector<std::weak_ptr<Job>> jobs_;
  // Operations that ended with buffers still posted: one may leave several (a header and its tensors).
  std::vector<Retired> retired_;
};

}  // namespace tensorlane::gloo
