#pragma once

#include <optional>

namespace tlgloo {

// The kernel's send buffer for a group's sockets to peers on the same host. Left to the kernel, a
// loopback socket's buffer grows to net.ipv4.tcp_wmem's maximum (4 MiB), and a large transfer then
// keeps that much in flight, beyond the CPUs' caches: every byte is copied into the kernel and out
// again through main memory. A buffer of kDefaultBytes (the kernel doubles it) keeps it in cache:
// raw Gloo one-way, 64 MiB, 10.0-10.6 ms against 13.4-14.6 (bench/rawSend.mjs, alternate runs).
// Sockets to other hosts keep the kernel's autotuning, which sizes them for the network's latency.
class SendBuffer {
 public:
  static constexpr int kDefaultBytes = 512 << 10;

  // TENSORLANE_GLOO_SEND_BUFFER: a byte count, or "kernel" (leave it to the kernel: nullopt); unset,
  // kDefaultBytes. Failure(Usage) for anything else.
  static std::optional<int> configured();

  // Asks for `bytes` on the connected socket `fd` when both its ends are addresses of one host. A
  // refusal is ignored: the buffer only changes how fast the socket is.
  static void sizeIfSameHost(int fd, int bytes);

  // What the kernel gives `fd`: twice what was asked (for its own bookkeeping), at most twice
  // net.core.wmem_max; -1 when it cannot be read.
  static int of(int fd);
};

}  // namespace tlgloo
