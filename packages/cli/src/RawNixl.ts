/**
 * Raw NIXL, the limit of the nixl rows: a READ of n bytes between two child processes
 * (internal/RawNixlPeer.ts) through transport-nixl's addon alone, with none of tensorlane's runtime:
 * the producer registers a buffer of each size once, the reader registers its destination once and
 * times each READ from its post to its end. Both start with the environment of an actor process
 * (its huge pages), and one pair serves the whole run, so that a benchmark can time each size just
 * before and just after its own cell.
 */
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { DeclaredRegion } from "@tensorlane/transport-nixl"
import { type Link, type RawLimit, endPeer, exitOf, linkOf } from "./internal/PeerLink.js"

/** Where a producer's buffer of a size is, for a READ of it. */
export interface RawNixlSource {
  readonly agent: string
  readonly blob: Uint8Array
  readonly epoch: number
  readonly region: DeclaredRegion
}

/** What the bench says to each peer, and what they answer. */
export type RawNixlMessage =
  | { readonly register: number }
  | { readonly source: RawNixlSource }
  | { readonly read: RawNixlSource; readonly bytes: number; readonly warmups: number; readonly repeats: number }
  | { readonly samplesMs: ReadonlyArray<number> }
  | { readonly failed: string }
  | { readonly done: true }

/** Timed READs, each from its post to its end. */
export type RawNixl = RawLimit

interface Peer {
  readonly child: ChildProcess
  readonly link: Link<RawNixlMessage>
  readonly exited: Promise<number | null>
  /** The peer's next answer; an Error naming the peer where it failed or exited first. */
  readonly answer: () => Promise<RawNixlMessage>
}

const startPeer = (role: "producer" | "reader", env: NodeJS.ProcessEnv): Peer => {
  const child = fork(fileURLToPath(new URL("./internal/RawNixlPeer.js", import.meta.url)), [role], { serialization: "advanced", stdio: "inherit", env })
  const link = linkOf<RawNixlMessage>(child)
  const exited = exitOf(child)
  const answer = async (): Promise<RawNixlMessage> => {
    const message = await Promise.race([link.next(), exited.then((code) => ({ failed: `it exited (code ${code})` }) as const)])
    if ("failed" in message) throw new Error(`raw NIXL: the ${role} failed: ${message.failed}`)
    return message
  }
  return { child, link, exited, answer }
}

/** The producer and the reader, started once for the run. */
export const openRawNixl = async (warmups: number): Promise<RawNixl> => {
  // Loaded only now, as the benchmark loads core: the CLI's other commands work without its runtime.
  const { actorEnvironment } = await import("@tensorlane/core")
  const env = actorEnvironment(process.env)
  const peers = [startPeer("producer", env), startPeer("reader", env)] as const
  const [producer, reader] = peers
  return {
    measure: async (bytes, repeats) => {
      producer.link.send({ register: bytes })
      const registered = await producer.answer()
      if (!("source" in registered)) throw new Error("raw NIXL: the producer did not say where its buffer is")
      reader.link.send({ read: registered.source, bytes, warmups, repeats })
      const read = await reader.answer()
      if (!("samplesMs" in read)) throw new Error("raw NIXL: the reader sent no samples")
      return read.samplesMs
    },
    close: async () => {
      await Promise.all(peers.map((peer) => endPeer(peer.child, peer.exited)))
    },
  }
}
