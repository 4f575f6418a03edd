#pragma once

#include "Job.h"

#include <string>

namespace tensorlane::gloo {

// A transfer of one object over the pair to `peer`: what the producer's and the consumer's halves share.
class PairJob : public Job {
 public:
  PairJob(Napi::Env env, std::shared_ptr<GroupState> group, std::vector<PinnedBytes> memory, std::chrono::milliseconds timeout,
          int peer, std::string objectId);

 protected:
  bool interruptible() const override { return true; }
  int peer() const { return peer_; }
  const std::string& objectId() const { return objectId_; }
  // The byte length of every tensor of the object, in order.
  std::vector<size_t> lengths() const;

 private:
  const int peer_;
  const std::string objectId_;
};

}  // namespace tensorlane::gloo
