/** What the raw limits (raw Gloo, raw NIXL) share: the IPC link to their peer processes, and their buffers. */
import type { ChildProcess } from "node:child_process"

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

/** A buffer of `bytes` holding patternByte at every index. */
export const patterned = (bytes: number): Uint8Array => {
  const buffer = new Uint8Array(new SharedArrayBuffer(bytes))
  for (let i = 0; i < bytes; i++) buffer[i] = patternByte(i)
  return buffer
}
