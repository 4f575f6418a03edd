#pragma once

#include "PairJob.h"

#include <memory>
#include <vector>

namespace tensorlane::gloo {

// The consumer's half of a transfer: waits for the producer's header, checks it against the byte
// lengths the consumer expects, then copies a small object's inline bytes out of it, or receives
// every tensor straight into its destination memory.
class ReceiveJob : public PairJob {
 public:
  using PairJob::PairJob;

 protected:
  // The header's receive, posted by the caller: the producer's send leaves as soon as it arrives.
  void post() override;
  void run() override;

 private:
  std::shared_ptr<std::vector<char>> announced_;
};

}  // namespace tensorlane::gloo
