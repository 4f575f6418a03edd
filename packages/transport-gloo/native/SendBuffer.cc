#include "SendBuffer.h"

#include "Failure.h"
#include "Settings.h"
#include "Sockets.h"

#include <sys/socket.h>

#include <climits>
#include <cstring>
#include <string>

namespace tlgloo {

namespace {

constexpr const char* kVariable = "TENSORLANE_GLOO_SEND_BUFFER";
// The value that leaves the buffer to the kernel.
constexpr const char* kKernel = "kernel";

}  // namespace

std::optional<int> SendBuffer::configured() {
  const char* value = setting(kVariable);
  if (value == nullptr) return kDefaultBytes;
  if (std::strcmp(value, kKernel) == 0) return std::nullopt;
  const std::string text(value);
  const bool digits = text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 10;
  const long long bytes = digits ? std::stoll(text) : 0;
  if (bytes < 1 || bytes > INT_MAX) {
    throw Failure(Failure::Kind::Usage, std::string(kVariable) + "=\"" + text + "\" is neither a byte count (like 524288) nor " + kKernel);
  }
  return static_cast<int>(bytes);
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

}  // namespace tlgloo
