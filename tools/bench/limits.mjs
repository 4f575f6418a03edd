// Limits measured in the same run as the transfers: a single-thread memcpy and TCP loopback.
import { fork } from "node:child_process"
import * as net from "node:net"
import { fileURLToPath } from "node:url"

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** Warm buffers on both sides, as a transfer into reused memory sees them. */
export const memcpyMs = (bytes, repeats, warmups) => {
  const src = new Uint8Array(bytes).fill(1)
  const dst = new Uint8Array(bytes).fill(0)
  const times = []
  for (let i = 0; i < warmups + repeats; i++) {
    const t0 = performance.now()
    dst.set(src)
    if (i >= warmups) times.push(performance.now() - t0)
  }
  return median(times)
}

/** One-way bytes over TCP loopback to another process, until it acknowledges the last byte. */
export const tcpLoopbackMs = async (bytes, repeats, warmups) => {
  const sink = fork(fileURLToPath(new URL("./tcpSink.mjs", import.meta.url)), [String(bytes)])
  const port = await new Promise((resolve) => sink.once("message", resolve))
  const socket = net.connect({ host: "127.0.0.1", port })
  await new Promise((resolve) => socket.once("connect", resolve))
  socket.setNoDelay(true)
  const payload = Buffer.alloc(bytes, 1)
  const times = []
  for (let i = 0; i < warmups + repeats; i++) {
    const t0 = performance.now()
    const acked = new Promise((resolve) => socket.once("data", resolve))
    socket.write(payload)
    await acked
    if (i >= warmups) times.push(performance.now() - t0)
  }
  socket.destroy()
  sink.kill()
  return median(times)
}
