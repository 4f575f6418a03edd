#include "SendBuffer.h"

#include "Sockets.h"

#include <tensorlane/Settings.h>

#include <sys/socket.h>

#include <climits>
#include <string>

namespace tensorlane::gloo {

namespace {

constexpr const char* kVariable = "TENSORLANE_GLOO_SEND_BUFFER";
// The value that leaves the buffer to the kernel.
constexpr const char* kKernel = "kernel";

}  // namespace

std::optional<int> SendBuffer::configured() {
  const std::optional<std::string> value = setting(kVariable);
  if (!value.has_value()) return kDefaultBytes;
  if (*value == kKernel) return std::nullopt;
  const std::optional<int64_t> bytes = parseInteger(*value, 1, INT_MAX);
  if (!bytes.has_value()) throw invalidSetting(kVariable, *value, "a byte count from 1 to " + std::to_string(INT_MAX) + ", or kernel");
  return static_cast<int>(*bytes);
}

void SendBuffer::sizeIfSameHost(int fd, int bytes) {
  const std::optional<Ends> ends = endsOf(fd);
  if (!ends.has_value() || !sameHost(ends->self, ends->peer)) return;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

int SendBuffer::of(int fd) {
  int bytes = 0;
  socklen_t length = sizeof(bytes);
  return getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &length) == 0 ? bytes : -1;
}

}  // namespace tensorlane::gloo
