#pragma once

#include "PairJob.h"

namespace tlgloo {

// The consumer's half of a transfer: waits for the producer's header, checks it against the byte
// lengths the consumer expects, then copies a small object's inline bytes out of it, or receives
// every tensor straight into its destination memory.
class ReceiveJob : public PairJob {
 public:
  using PairJob::PairJob;

 protected:
  void run() override;
};

}  // namespace tlgloo
