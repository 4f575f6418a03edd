/**
 * The limits a transfer is compared with, measured in the same run: a single-thread memcpy and a TCP
 * stream (over loopback, or between two hosts' actors for a run across hosts); and the message ring,
 * the floor under a call's own messages and its stalls.
 */
import { type ChildProcess, fork } from "node:child_process"
import * as net from "node:net"
import { fileURLToPath } from "node:url"

export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** How many of `samples` took over twice `medianMs`: the stalls a median hides. */
export const overTwiceMedian = (samples: ReadonlyArray<number>, medianMs: number): number => samples.filter((ms) => ms > 2 * medianMs).length

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

/** The message ring of a run: its median, every timed run, and how many took over twice the median. */
export interface RingLimit {
  readonly medianMs: number
  readonly samplesMs: ReadonlyArray<number>
  readonly overTwiceMedian: number
}

/** The value a small call carries (inside its messages, as values of 64 KiB or less travel). */
export const RING_VALUE_BYTES = 4096
/** Round trips before the ring is timed, whatever the run's warm-ups: Node's IPC code is optimised over them. */
const RING_WARMUPS = 500

/**
 * A reference for the four messages of a call of a small value, driver to producer (the call) to
 * driver (the result, with the value) to consumer (its call, with the value) to driver (its result),
 * between this process and two plain Node processes that answer each message (Node's IPC pipe,
 * V8-serialized, where tensorlane frames its own): the median in ms of at least `repeats` timed round
 * trips, more until they add up to `minTimeMs` (at most `maxRuns`), as a benchmark cell's runs. Its
 * runs over twice its median are the stalls this machine gives any such loop (a process woken on a
 * CPU that is busy, or idle and slow to wake), none of them tensorlane's.
 */
export const messageRing = async (repeats: number, minTimeMs: number, maxRuns: number): Promise<RingLimit> => {
  const script = fileURLToPath(new URL("./internal/RingPeer.js", import.meta.url))
  const peers: Array<{ readonly process: ChildProcess; readonly exited: Promise<unknown> }> = []
  let pending: { readonly resolve: () => void; readonly reject: (error: Error) => void } | undefined
  let failure: Error | undefined
  const fail = (error: Error) => {
    failure ??= error
    pending?.reject(failure)
  }
  try {
    for (const replyBytes of [RING_VALUE_BYTES, 0]) {
      const peer = fork(script, [String(replyBytes)], { serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] })
      // A process that never started reports 'error' and may never report 'exit'.
      const exited = new Promise((resolve) => {
        peer.once("exit", resolve)
        peer.once("error", resolve)
      })
      peers.push({ process: peer, exited })
      peer.on("exit", (code, signal) => fail(new Error(`a process of the message ring exited (${signal ?? `code ${code}`}) while the ring ran`)))
      peer.on("error", (error) => fail(new Error(`a process of the message ring failed: ${error.message}`)))
      peer.on("message", () => pending?.resolve())
    }
    const call = { id: 0 }
    const withValue = { id: 0, value: new Uint8Array(RING_VALUE_BYTES) }
    const hop = (peer: ChildProcess, message: object) =>
      new Promise<void>((resolve, reject) => {
        if (failure !== undefined) return reject(failure)
        pending = { resolve, reject }
        peer.send(message)
      })
    const roundTrip = async () => {
      await hop(peers[0]!.process, call)
      await hop(peers[1]!.process, withValue)
    }
    for (let i = 0; i < RING_WARMUPS; i++) await roundTrip()
    const samplesMs: Array<number> = []
    for (let total = 0; samplesMs.length < repeats || (total < minTimeMs && samplesMs.length < maxRuns); ) {
      const t0 = performance.now()
      await roundTrip()
      const ms = performance.now() - t0
      samplesMs.push(ms)
      total += ms
    }
    const medianMs = median(samplesMs)
    return { medianMs, samplesMs, overTwiceMedian: overTwiceMedian(samplesMs, medianMs) }
  } finally {
    for (const peer of peers) peer.process.kill()
    // Gone before the next limit is timed: their ends are not to be charged to it.
    await Promise.all(peers.map((peer) => peer.exited))
  }
}
