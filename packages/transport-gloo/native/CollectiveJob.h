#pragma once

#include "Job.h"

#include <string>
#include <vector>

namespace tensorlane::gloo {

// gloo::allreduce or gloo::broadcast in place on each tensor in turn, one tag per tensor.
class CollectiveJob : public Job {
 public:
  enum class Kind { Allreduce, Broadcast };
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

 protected:
  void run() override;
  // gloo's collectives cannot be interrupted: the ranks may now disagree on where they are.
  void onAbort() override;

 private:
  // The ranks' specs compared through a small all-gather (its tag the first of the job's): a Shape
  // failure on every rank where they differ, before any tensor moves.
  void agree(const std::shared_ptr<::gloo::Context>& context);

  Spec spec_;
};

}  // namespace tensorlane::gloo
