#include "GroupState.h"

#include "AddressBlob.h"
#include "Device.h"
#include "Job.h"
#include "SendBuffer.h"

#include <tensorlane/Failure.h>

#include <gloo/common/error.h>

#include <algorithm>
#include <iterator>

namespace tensorlane::gloo {

GroupState::GroupState(int rank, int size, std::chrono::milliseconds connectTimeout, bool deviceCpusByRank)
    : rank_(rank),
      size_(size),
      context_(std::make_shared<ExtContext>(rank, size, connectTimeout)),
      secret_(rank == 0 ? PairGuard::newSecret() : std::vector<uint8_t>()),
      sendBufferBytes_(SendBuffer::configured()) {
  const auto share = deviceCpusByRank ? std::optional<RankShare>(RankShare{rank, size}) : std::nullopt;
  blob_ = AddressBlob::pack(rank, size, secret_, context_->createPairs(Device::shared(share)));
}

GroupState::Rendezvous GroupState::rendezvous(const std::vector<std::vector<uint8_t>>& blobs) const {
  if (blobs.size() != static_cast<size_t>(size_)) {
    throw Failure(FailureCode::Protocol, "the all-gather returned " + std::to_string(blobs.size()) + " address blobs for a group of " +
                                               std::to_string(size_));
  }
  Rendezvous rendezvous{std::vector<std::vector<char>>(size_), std::vector<PairProofs>(size_)};
  std::vector<uint8_t> secret = secret_;
  for (int owner = 0; owner < size_; owner++) {
    if (owner == rank_) continue;
    AddressBlob::Contents contents = AddressBlob::read(blobs[owner].data(), blobs[owner].size(), owner, size_, rank_);
    rendezvous.addresses[owner] = std::move(contents.address);
    if (owner == 0) secret = std::move(contents.secret);
  }
  for (int peer = 0; peer < size_; peer++) {
    if (peer != rank_) rendezvous.proofs[peer] = PairGuard::proofs(secret, rank_, peer);
  }
  return rendezvous;
}

void GroupState::connect(const Rendezvous& rendezvous) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (phase_ == Phase::Closed) throw Failure(FailureCode::Closed, "the group was destroyed before it connected");
    if (phase_ != Phase::Created) throw Failure(FailureCode::Usage, "connect() was called twice");
    phase_ = Phase::Connecting;
  }
  // gloo's own bound on waiting for a peer to connect (tcp::Pair::waitUntilConnected).
  const Deadline deadline = std::chrono::steady_clock::now() + 5 * context_->getTimeout();
  try {
    for (int peer = 0; peer < size_; peer++) {
      if (peer != rank_) context_->connectPeer(peer, rendezvous.addresses[peer], rendezvous.proofs[peer], deadline);
    }
  } catch (const std::exception& e) {
    ExtContext::park(context_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (phase_ == Phase::Closed) throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
    }
    const std::string reason = std::string("connecting the gloo pairs failed: ") + e.what();
    markBroken(reason);
    // The guard's failures say what they are; gloo's only in words.
    const auto* failure = dynamic_cast<const Failure*>(&e);
    const bool timedOut = std::string(e.what()).find("timeout") != std::string::npos;
    throw Failure(failure != nullptr ? failure->code() : timedOut ? FailureCode::Timeout : FailureCode::Io, reason);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ == Phase::Closed) {
    // close() ended the connect by closing the pairs; some may have connected, some not.
    ExtContext::park(context_);
    throw Failure(FailureCode::Closed, "the group was destroyed while it connected");
  }
  // Under the lock: close() cannot have closed the sockets yet.
  const std::vector<int> sockets = context_->rememberSockets();
  if (sendBufferBytes_.has_value()) {
    for (int fd : sockets) SendBuffer::sizeIfSameHost(fd, *sendBufferBytes_);
  }
  phase_ = Phase::Connected;
}

std::vector<int> GroupState::sendBuffers() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::Connected) return {};
  std::vector<int> bytes;
  for (int fd : context_->sockets()) bytes.push_back(fd < 0 ? -1 : SendBuffer::of(fd));
  return bytes;
}

std::shared_ptr<ExtContext> GroupState::context() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ == Phase::Closed) throw Failure(FailureCode::Closed, "the group was destroyed");
  if (!broken_.empty()) throw Failure(FailureCode::Broken, broken_);
  if (phase_ != Phase::Connected) throw Failure(FailureCode::Usage, "the group is not connected yet");
  return context_;
}

void GroupState::markBroken(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.empty()) broken_ = reason;
}

bool GroupState::closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return phase_ == Phase::Closed;
}

std::string GroupState::brokenReason() {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

uint32_t GroupState::takeTags() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t first = nextTag_;
  nextTag_ += kTagsPerCollective;
  return first;
}

void GroupState::attach(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(), [](const std::weak_ptr<Job>& j) { return j.expired(); }), jobs_.end());
  jobs_.push_back(job);
}

void GroupState::detach(const Job* job) {
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(),
                             [job](const std::weak_ptr<Job>& j) {
                               auto live = j.lock();
                               return live == nullptr || live.get() == job;
                             }),
              jobs_.end());
}

void GroupState::retire(std::vector<Posted> posted, std::vector<std::shared_ptr<void>> owned, size_t pinnedBytes,
                        std::function<void()> released) {
  std::vector<Retired> done;
  done.push_back(Retired{std::move(posted), std::move(owned), pinnedBytes, std::move(released)});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Kept for close() to let go of unless it already did: it closes the pairs first.
    if (!pairsClosed_ && !settled(done.back())) {
      retired_.push_back(std::move(done.back()));
      done.clear();
    }
  }
  release(std::move(done));
}

bool GroupState::settled(const Retired& retired) {
  return std::all_of(retired.posted.begin(), retired.posted.end(), [this](const Posted& p) { return context_->pairClosed(p.peer); });
}

void GroupState::sweep() {
  std::vector<Retired> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto kept = std::stable_partition(retired_.begin(), retired_.end(), [this](const Retired& r) { return !settled(r); });
    std::move(kept, retired_.end(), std::back_inserter(done));
    retired_.erase(kept, retired_.end());
  }
  release(std::move(done));
}

void GroupState::release(std::vector<Retired> retired) {
  for (auto& r : retired) {
    // Buffers before the memory they point into; gloo's buffer destructor waits until the device
    // thread has let go of it.
    r.posted.clear();
    r.owned.clear();
    if (r.released) r.released();
  }
}

GroupState::Stranded GroupState::stranded() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (const auto& r : retired_) bytes += r.pinnedBytes;
  return Stranded{retired_.size(), bytes};
}

void GroupState::close() {
  std::vector<std::shared_ptr<Job>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (phase_ == Phase::Closed) return;
    phase_ = Phase::Closed;
    for (auto& j : jobs_) {
      if (auto live = j.lock()) running.push_back(live);
    }
    jobs_.clear();
  }
  for (auto& job : running) job->abort();
  context_->closePairs();
  // Closed pairs no longer touch any buffer: what was retired can go.
  std::vector<Retired> retired;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pairsClosed_ = true;
    retired.swap(retired_);
  }
  release(std::move(retired));
}

}  // namespace tensorlane::gloo
