#!/usr/bin/env node
/**
 * Raw Gloo point to point, the reference the benchmark compares the actor path with (DESIGN §5):
 * a one-way send of n bytes from this process to a child process through the addon alone, timed
 * on the sender from the send until the receiver's 1-byte acknowledgement arrives (so the figure
 * includes one small-message hop), median of `repeats` after `warmups`.
 *
 *   node packages/transport-gloo/bench/rawSend.mjs [bytes...]   prints the figures as JSON
 *   import { measureRawSend, openRawSend } from "@tensorlane/transport-gloo/bench/raw-send"
 */
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { loadGlooAddon } from "@tensorlane/transport-gloo"

const HOUR = 3_600_000
const DEFAULT_SIZES = [4 << 10, 64 << 20, 256 << 20]

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/**
 * Requests to the other process and its answers, over the IPC channel. A message may arrive before
 * `next()` is called (the peer's next request can beat the completion of its last ack), so it waits.
 */
const channel = (endpoint) => {
  const waiting = []
  const arrived = []
  endpoint.on("message", (message) => {
    const resolve = waiting.shift()
    if (resolve !== undefined) resolve(message)
    else arrived.push(message)
  })
  return {
    send: (message) => endpoint.send(message),
    next: () => (arrived.length > 0 ? Promise.resolve(arrived.shift()) : new Promise((resolve) => waiting.push(resolve))),
  }
}

const connect = async (rank, link) => {
  const { addon } = loadGlooAddon()
  const group = new addon.Group(rank, 2, 30_000)
  link.send({ blob: group.address() })
  const { blob } = await link.next()
  await group.connect(rank === 0 ? [group.address(), blob] : [blob, group.address()])
  return group
}

/** Buffers of each size, made (and their pages touched) on first use, then reused like raw Gloo's own. */
const buffersBySize = (make) => {
  const made = new Map()
  return (bytes) => {
    let buffer = made.get(bytes)
    if (buffer === undefined) made.set(bytes, (buffer = make(bytes)))
    return buffer
  }
}

/** The receiving side: receives each send it is told of into its buffer of that size, and acknowledges it. */
const peer = async () => {
  const link = channel(process)
  const group = await connect(1, link)
  const ack = new Uint8Array(new SharedArrayBuffer(1))
  const into = buffersBySize((bytes) => new Uint8Array(new SharedArrayBuffer(bytes)).fill(1))
  for (;;) {
    const message = await link.next()
    if (message.done) break
    const { tag, bytes } = message
    const buffer = into(bytes)
    link.send({ ready: true })
    await group.receive(0, `raw-${tag}`, [buffer], HOUR).promise
    if (buffer[bytes - 1] !== (bytes - 1) % 251) throw new Error(`raw gloo bench: the last byte of ${bytes} arrived wrong`)
    await group.send(0, `ack-${tag}`, [ack], HOUR).promise
  }
  group.destroy()
  process.disconnect()
}

/**
 * A sender in this process and a receiving child, connected once: `measure(bytes, repeats)` times
 * `repeats` one-way sends of that size after `warmups`, whenever the caller wants (a benchmark
 * measures each size just before and after its own runs of it, so that both see the machine in the
 * same state), with the same buffers each time; `close()` ends the child.
 */
export const openRawSend = async ({ warmups = 2 } = {}) => {
  const child = fork(fileURLToPath(import.meta.url), ["--peer"], { serialization: "advanced", stdio: "inherit" })
  const link = channel(child)
  const exited = new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)))
  let group
  try {
    group = await connect(0, link)
  } catch (error) {
    child.kill()
    await exited
    throw error
  }
  const ack = new Uint8Array(new SharedArrayBuffer(1))
  const data = buffersBySize((bytes) => {
    const buffer = new Uint8Array(new SharedArrayBuffer(bytes))
    for (let i = 0; i < bytes; i++) buffer[i] = i % 251
    return buffer
  })
  let sent = 0
  const sample = async (bytes) => {
    const tag = sent++
    const buffer = data(bytes)
    // The receiver posts its receive as it answers: the timed part is the send and its ack only.
    link.send({ tag, bytes })
    await link.next()
    const start = process.hrtime.bigint()
    await group.send(1, `raw-${tag}`, [buffer], HOUR).promise
    await group.receive(1, `ack-${tag}`, [ack], HOUR).promise
    return Number(process.hrtime.bigint() - start) / 1e6
  }
  return {
    measure: async (bytes, repeats) => {
      for (let i = 0; i < warmups; i++) await sample(bytes)
      const samplesMs = []
      for (let i = 0; i < repeats; i++) samplesMs.push(await sample(bytes))
      const medianMs = median(samplesMs)
      return { bytes, medianMs, gbPerS: bytes / (medianMs / 1e3) / 1e9, samplesMs }
    },
    close: async () => {
      link.send({ done: true })
      group.destroy()
      await exited
    },
  }
}

/** Medians (ms) and throughput of a one-way addon send for each size, between this process and a child. */
export const measureRawSend = async ({ sizes = DEFAULT_SIZES, warmups = 2, repeats = 7 } = {}) => {
  const raw = await openRawSend({ warmups })
  try {
    const results = []
    for (const bytes of sizes) results.push(await raw.measure(bytes, repeats))
    return { path: "gloo raw addon, one-way send + 1-byte ack, two processes", warmups, repeats, results }
  } finally {
    await raw.close()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--peer")) {
    await peer()
  } else {
    const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0)
    console.log(JSON.stringify(await measureRawSend(sizes.length > 0 ? { sizes } : {}), null, 2))
  }
}
