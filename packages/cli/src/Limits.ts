/**
 * The limits a transfer is compared with, measured in the same run: a single-thread memcpy and a TCP
 * stream (over loopback, or between two hosts' actors for a run across hosts).
 */
import { fork } from "node:child_process"
import * as net from "node:net"
import { fileURLToPath } from "node:url"

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Milliseconds of a copy between warm buffers, as a transfer into reused memory sees them; median. */
export const memcpyMs = (bytes: number, repeats: number, warmups: number): number => {
  const src = new Uint8Array(bytes).fill(1)
  const dst = new Uint8Array(bytes)
  const times: Array<number> = []
  for (let i = 0; i < warmups + repeats; i++) {
    const t0 = performance.now()
    dst.set(src)
    if (i >= warmups) times.push(performance.now() - t0)
  }
  return median(times)
}

/** A forked process that receives messages of `bytes` on `host` and acknowledges each with one byte; its port. */
export const startTcpSink = async (bytes: number, host: string): Promise<{ readonly port: number; readonly close: () => void }> => {
  const sink = fork(fileURLToPath(new URL("./internal/TcpSink.js", import.meta.url)), [String(bytes), host])
  try {
    const port = await new Promise<number>((resolve, reject) => {
      sink.once("message", (message) => resolve(message as number))
      sink.once("exit", (code) => reject(new Error(`the TCP sink exited with code ${code} before listening`)))
    })
    return { port, close: () => sink.kill() }
  } catch (error) {
    sink.kill()
    throw error
  }
}

/** Milliseconds of a one-way send of `bytes` to the sink at `host`:`port`, until it acknowledges the last byte; median. */
export const tcpStreamMs = async (host: string, port: number, bytes: number, repeats: number, warmups: number): Promise<number> => {
  const socket = net.connect({ host, port })
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve)
      socket.once("error", reject)
    })
    socket.setNoDelay(true)
    const payload = Buffer.alloc(bytes, 1)
    const times: Array<number> = []
    for (let i = 0; i < warmups + repeats; i++) {
      const t0 = performance.now()
      const acked = new Promise((resolve) => socket.once("data", resolve))
      socket.write(payload)
      await acked
      if (i >= warmups) times.push(performance.now() - t0)
    }
    return median(times)
  } finally {
    socket.destroy()
  }
}

/** Milliseconds of a one-way send to another process over TCP loopback, until it acknowledges the last byte; median. */
export const tcpLoopbackMs = async (bytes: number, repeats: number, warmups: number): Promise<number> => {
  const sink = await startTcpSink(bytes, "127.0.0.1")
  try {
    return await tcpStreamMs("127.0.0.1", sink.port, bytes, repeats, warmups)
  } finally {
    sink.close()
  }
}
