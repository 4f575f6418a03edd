#pragma once

#include "Job.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tensorlane::gloo {

// gloo::allreduce or gloo::broadcast in place on each tensor in turn, one tag per tensor.
class CollectiveJob : public Job {
 public:
  // Refused: this rank's part of a collective it refused before starting (a header, no tensors).
  enum class Kind { Allreduce, Broadcast, Refused };
  enum class Op { Sum, Product, Min, Max };

  struct Spec {
    Kind kind;
    // Allreduce: the element type of each tensor (names as in tensorlane's DType).
    std::vector<std::string> dtypes;
    Op op;
    // Broadcast: the rank whose tensors everyone receives.
    int root;
    uint32_t firstTag;
  };

  CollectiveJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout,
                Spec spec);

  // Whether gloo can reduce this dtype (broadcast moves any dtype as bytes).
  static bool reducible(const std::string& dtype);
  static size_t itemSize(const std::string& dtype);

  /** What one rank passes to a collective: its kind, its op or root, how many tensors, their bytes, and a digest of each one's size and dtype. */
  using Header = std::array<uint64_t, 5>;

 protected:
  // Posts this rank's header to every peer and a receive of theirs (TransferKey::agreementSlot).
  void post() override;
  void run() override;
  // gloo's collectives cannot be interrupted: the ranks may now disagree on where they are.
  void onAbort() override;

 private:
  // Waits for the peers' headers and compares them with this rank's: a Shape failure on every rank
  // where they differ, before any tensor moves.
  void agree(const ::gloo::Context& context);

  Spec spec_;
  // Every rank's header, by rank: this rank's is sent, the others' received into it.
  std::shared_ptr<std::vector<Header>> headers_;
};

}  // namespace tensorlane::gloo
