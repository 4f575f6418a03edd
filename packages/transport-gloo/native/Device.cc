#include "Device.h"

#include "Failure.h"

#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <mutex>

namespace tlgloo {

std::string Device::host() {
  const char* configured = std::getenv("TENSORLANE_GLOO_HOST");
  return configured != nullptr && configured[0] != '\0' ? configured : "127.0.0.1";
}

std::shared_ptr<gloo::transport::Device> Device::shared() {
  static std::mutex mutex;
  static std::shared_ptr<gloo::transport::Device> device;
  std::lock_guard<std::mutex> lock(mutex);
  if (device == nullptr) {
    gloo::transport::tcp::attr attr;
    attr.hostname = host();
    attr.ai_family = AF_UNSPEC;
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw Failure(Failure::Kind::Io, "cannot open a gloo TCP device on " + attr.hostname +
                                           " (set TENSORLANE_GLOO_HOST to an address of this host): " + e.what());
    }
  }
  return device;
}

}  // namespace tlgloo
