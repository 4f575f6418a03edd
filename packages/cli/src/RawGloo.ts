/**
 * Raw Gloo, the limit of the gloo rows: a one-way send of n bytes from this process to a child
 * process (internal/RawGlooPeer.ts) through transport-gloo's addon alone, timed on the sender from the send
 * until the receiver's 1-byte acknowledgement arrives (so the figure includes one small-message
 * hop). One connected pair serves the whole run, so that a benchmark can time each size just before
 * and just after its own cell and compare figures taken seconds apart.
 */
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { NativeGroup } from "@tensorlane/transport-gloo"
import { HOUR_MS, type Link, type RawLimit, buffersBySize, endPeer, exitOf, linkOf, patterned } from "./internal/PeerLink.js"

/** What the two processes tell each other over the IPC channel. */
export type RawGlooMessage =
  | { readonly blob: Uint8Array }
  | { readonly tag: number; readonly bytes: number }
  | { readonly ready: true }
  | { readonly done: true }

/** This rank of a two-rank gloo group, connected through the link. */
export const connectPair = async (rank: 0 | 1, link: Link<RawGlooMessage>): Promise<NativeGroup> => {
  const { loadGlooAddon } = await import("@tensorlane/transport-gloo")
  const { addon } = loadGlooAddon()
  const group = new addon.Group(rank, 2, 30_000)
  link.send({ blob: group.address() })
  const message = await link.next()
  if (!("blob" in message)) throw new Error("raw Gloo: the peer sent no address")
  await group.connect(rank === 0 ? [group.address(), message.blob] : [message.blob, group.address()])
  return group
}

/** Timed sends, each until the receiver's acknowledgement. */
export type RawGloo = RawLimit

/** A sender in this process and a receiving child, connected once. */
export const openRawGloo = async (warmups: number): Promise<RawGloo> => {
  const child = fork(fileURLToPath(new URL("./internal/RawGlooPeer.js", import.meta.url)), [], { serialization: "advanced", stdio: "inherit" })
  const link = linkOf<RawGlooMessage>(child)
  const exited = exitOf(child)
  let group: NativeGroup
  try {
    group = await connectPair(0, link)
  } catch (error) {
    child.kill()
    await exited
    throw error
  }
  const ack = new Uint8Array(new SharedArrayBuffer(1))
  const data = buffersBySize(patterned)
  let sent = 0
  const sample = async (bytes: number): Promise<number> => {
    const tag = sent++
    // The receiver posts its receive as it answers: the timed part is the send and its ack only.
    link.send({ tag, bytes })
    await link.next()
    const start = process.hrtime.bigint()
    await group.send(1, `raw-${tag}`, [data(bytes)], HOUR_MS).promise
    await group.receive(1, `ack-${tag}`, [ack], HOUR_MS).promise
    return Number(process.hrtime.bigint() - start) / 1e6
  }
  return {
    measure: async (bytes, repeats) => {
      for (let i = 0; i < warmups; i++) await sample(bytes)
      const samplesMs: Array<number> = []
      for (let i = 0; i < repeats; i++) samplesMs.push(await sample(bytes))
      return samplesMs
    },
    close: async () => {
      // Told to end before this rank's group goes.
      const ended = endPeer(child, exited)
      group.destroy()
      await ended
    },
  }
}
