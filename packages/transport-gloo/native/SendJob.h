#pragma once

#include "PairJob.h"

namespace tensorlane::gloo {

// The producer's half of a transfer: the object's header with a small object's bytes behind it, or
// the header and then every tensor straight from its memory, each to its own slot on the pair.
class SendJob : public PairJob {
 public:
  using PairJob::PairJob;

 protected:
  void run() override;
};

}  // namespace tensorlane::gloo
