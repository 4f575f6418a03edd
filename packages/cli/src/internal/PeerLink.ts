/** What the raw limits (raw Gloo, raw NIXL) share: the IPC link to their peer processes, and their buffers. */
import type { ChildProcess } from "node:child_process"

/** A raw library's pair of processes, open for a run: timed samples of a size, and its end. */
export interface RawLimit {
  /** `repeats` timed transfers of `bytes` after the warm-ups, in ms. */
  readonly measure: (bytes: number, repeats: number) => Promise<ReadonlyArray<number>>
  readonly close: () => Promise<void>
}

/** The exit code of a child process, once it has exited. */
export const exitOf = (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", (code) => resolve(code))))

/** How long a peer asked to end has before it is killed (one stuck in its library, say). */
const END_GRACE_MS = 10_000

/** Asks a peer to end, where its channel is still open (a send on a closed one throws later), and waits for its exit. */
export const endPeer = async (child: ChildProcess, exited: Promise<unknown>): Promise<void> => {
  if (child.connected) child.send({ done: true })
  const timer = setTimeout(() => child.kill("SIGKILL"), END_GRACE_MS)
  try {
    await exited
  } finally {
    clearTimeout(timer)
  }
}

/** A wait long enough that only the benchmark's own end stops it. */
export const HOUR_MS = 3_600_000

export interface Link<M extends object> {
  readonly send: (message: M) => void
  readonly next: () => Promise<M>
}

type Endpoint = Pick<ChildProcess, "on" | "send"> | NodeJS.Process

/** Requests and answers over the IPC channel; a message may arrive before `next()` is called, so it waits. */
export const linkOf = <M extends object>(endpoint: Endpoint): Link<M> => {
  const waiting: Array<(message: M) => void> = []
  const arrived: Array<M> = []
  endpoint.on("message", (message: M) => {
    const resolve = waiting.shift()
    if (resolve !== undefined) resolve(message)
    else arrived.push(message)
  })
  return {
    send: (message) => endpoint.send!(message),
    next: () => (arrived.length > 0 ? Promise.resolve(arrived.shift()!) : new Promise((resolve) => waiting.push(resolve))),
  }
}

/** Buffers of each size, made (and their pages touched) on first use, then reused as a raw library reuses its own. */
export const buffersBySize = (make: (bytes: number) => Uint8Array): ((bytes: number) => Uint8Array) => {
  const made = new Map<number, Uint8Array>()
  return (bytes) => {
    let buffer = made.get(bytes)
    if (buffer === undefined) made.set(bytes, (buffer = make(bytes)))
    return buffer
  }
}

/** The byte at index i of every send, checked by the receiver at the last index. */
export const patternByte = (i: number): number => i % 251

/** A receiving buffer of `bytes`, its pages touched now rather than in the first timed transfer. */
export const touched = (bytes: number): Uint8Array => new Uint8Array(new SharedArrayBuffer(bytes)).fill(1)

/** A buffer of `bytes` holding patternByte at every index. */
export const patterned = (bytes: number): Uint8Array => {
  const buffer = new Uint8Array(new SharedArrayBuffer(bytes))
  for (let i = 0; i < bytes; i++) buffer[i] = patternByte(i)
  return buffer
}
