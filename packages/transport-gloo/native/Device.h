#pragma once

#include <gloo/transport/device.h>

#include <memory>
#include <optional>
#include <string>

namespace tensorlane::gloo {

// A rank of a group of `size`, whose device thread takes its share of the process's CPUs.
struct RankShare {
  int rank;
  int size;
};

// The process's one Gloo TCP device: a listening socket and an event-loop thread that every group
// of the process shares (the thread that moves the bytes of every transfer). Created on first use,
// kept for the life of the process (gloo's listener may still route late connections to contexts
// created on it). Its thread keeps to the CPUs TENSORLANE_GLOO_DEVICE_CPUS lists ("all": anywhere);
// unset, the first creator's `share`: the members of a group, one process each on a host, then
// never have two device threads on one CPU (a sender and its receiver on one core take turns).
class Device {
 public:
  static std::shared_ptr<::gloo::transport::Device> shared(std::optional<RankShare> share = std::nullopt);

  // The interface the device binds: TENSORLANE_GLOO_HOST, else the loopback address.
  static std::string host();

  // While one lives, the device's event loop goes round again at once instead of waiting up to
  // 10 ms for an event: gloo's close of a pair whose socket is still in the loop waits for the
  // loop's next round, so closing a group's unconnected pairs took 10 ms each on the calling thread.
  class Ticking {
   public:
    Ticking();
    ~Ticking();
    Ticking(const Ticking&) = delete;
    Ticking& operator=(const Ticking&) = delete;

   private:
    int fd_;
  };
};

}  // namespace tensorlane::gloo
