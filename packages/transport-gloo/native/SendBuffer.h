#pragma once

#include <optional>

namespace tensorlane::gloo {

// The kernel's send buffer for a group's sockets to peers on the same host. Left to the kernel, a
// loopback socket's buffer grows to net.ipv4.tcp_wmem's maximum (often 4 MiB), and a large transfer
// then keeps that much in flight, more than the CPUs' caches hold, so that its bytes are likely
// copied into the kernel and out again through main memory; kDefaultBytes (which the kernel doubles)
// made large transfers about a third faster (docs/decisions/gloo-send-buffer.md). Sockets to other
// hosts keep the kernel's autotuning, which sizes them for the network's latency.
class SendBuffer {
 public:
  static constexpr int kDefaultBytes = 512 << 10;

  // TENSORLANE_GLOO_SEND_BUFFER: a byte count, or "kernel" (leave it to the kernel: nullopt); unset,
  // kDefaultBytes. Failure(Setting) for anything else.
  static std::optional<int> configured();

  // Asks for `bytes` on the connected socket `fd` when both its ends are addresses of one host. A
  // refusal is ignored: the buffer only changes how fast the socket is.
  static void sizeIfSameHost(int fd, int bytes);

  // What the kernel gives `fd`: twice what was asked (for its own bookkeeping), at most twice
  // net.core.wmem_max; -1 when it cannot be read.
  static int of(int fd);
};

}  // namespace tensorlane::gloo
