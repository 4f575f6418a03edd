#pragma once

#include <gloo/transport/device.h>

#include <memory>
#include <string>

namespace tlgloo {

// The process's one Gloo TCP device: a listening socket and an event-loop thread that every group
// of the process shares (the thread that moves the bytes of every transfer). Created on first use,
// kept for the life of the process (gloo's listener may still route late connections to contexts
// created on it). TENSORLANE_GLOO_DEVICE_CPUS restricts its thread to the CPUs it lists.
class Device {
 public:
  static std::shared_ptr<gloo::transport::Device> shared();

  // The interface the device binds: TENSORLANE_GLOO_HOST, else the loopback address.
  static std::string host();
};

}  // namespace tlgloo
