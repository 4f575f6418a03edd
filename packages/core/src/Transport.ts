/**
 * The tensor transport plugin API. A transport module exports a `TensorTransport` (as its default
 * export or a named one); every process of a cluster imports the same module by specifier and runs
 * the transport inside its transfer agent, a worker thread that keeps moving bytes while the
 * process's main JS thread is busy.
 */
import { InvalidArgumentError } from "./Errors.js"
import type { Tensor } from "./Tensor.js"
import type { TensorMeta } from "./internal/messages.js"

export type { TensorMeta }

/** What a transport can do, declared up front so that the runtime can refuse what it cannot. */
export interface TransportCapabilities {
  /** The consumer pulls the bytes (fetch) without the producer's involvement; else both sides act (send/receive). */
  readonly oneSided: boolean
  /** Transfers need a collective group holding both actors (created with `createCollectiveGroup`). */
  readonly needsGroup: boolean
  /** The transport honours the AbortSignal of a transfer (timeouts and dead peers end it promptly). */
  readonly abortable: boolean
  /** Device kinds whose memory the transport moves. */
  readonly devices: ReadonlyArray<"cpu" | "cuda">
  /** The transport writes into buffers the receiver provides (`get(ref, { target })`). */
  readonly receiveIntoBuffers: boolean
  /**
   * Its functions work on any thread of a process: what threads must share (registrations, groups)
   * lives in its native side. The thread that makes an object then registers it, and the thread that
   * needs one receives it, each without a round trip through the transfer agent (two thread wake-ups).
   * Sends, collectives (a collective receive too) and groups stay in the agent, which runs while the
   * main thread is busy.
   */
  readonly anyThread?: boolean
  /**
   * Two-sided: a receive takes the send of its own object whatever the order they were made in (gloo
   * derives its message slots from the object id; NCCL matches by order, so it must not say so). The
   * producer's agent may then start a send as soon as the object exists, before the consumer's call
   * is dispatched, and a consumer receives several such objects of one call at once.
   */
  readonly matchesByObject?: boolean
  /**
   * A fetch, receive or collective that failed (or that the runtime gave up on) no longer writes its
   * buffers once its promise settled and every promise it handed to the request's `writesUntil`
   * settled too. The runtime keeps the memory of a failed transfer out of reuse until then, and only
   * until then; without this, for the life of the process (it cannot know what a transport still
   * writes).
   */
  readonly tracksBuffers?: boolean
}

/** Part of every request whose buffers a transport writes. */
export interface WritesUntil {
  /**
   * Set by the runtime (absent when a program calls the transport itself). A transport whose native
   * side may go on writing the buffers after its promise settled (an aborted receive that stays
   * posted until its connection closes) passes, before that promise settles, a promise that settles
   * once it no longer can.
   */
  readonly writesUntil?: (done: Promise<unknown>) => void
}

/** The tensors of one object, as the producer holds them (views of the producer's own memory). */
export interface TransportObject {
  readonly objectId: string
  readonly tensors: ReadonlyArray<Tensor>
}

/** Where a transfer comes from and goes to. */
export interface TransferPeers {
  readonly objectId: string
  /** Actor id of the producer ("driver" for objects the driver put). */
  readonly producer: string
  /** Address of the producer's transfer agent (a Unix socket path). */
  readonly producerAddress: string
  /** Actor id of the receiving process ("driver" for `get` in the driver). */
  readonly consumer: string
}

/** A one-sided read into `into`, whose shapes and dtypes the runtime already checked against `tensors`. */
export interface FetchRequest extends TransferPeers, WritesUntil {
  readonly tensors: ReadonlyArray<TensorMeta>
  /** What `extractMetadata` returned on the producer. */
  readonly metadata: unknown
  readonly into: ReadonlyArray<Tensor>
  readonly signal: AbortSignal
}

/** The producer's half of a two-sided transfer. */
export interface SendRequest {
  readonly object: TransportObject
  readonly group: string
  readonly toRank: number
  readonly signal: AbortSignal
}

/** The consumer's half of a two-sided transfer. */
export interface ReceiveRequest extends TransferPeers, WritesUntil {
  readonly group: string
  readonly fromRank: number
  readonly tensors: ReadonlyArray<TensorMeta>
  readonly metadata: unknown
  readonly into: ReadonlyArray<Tensor>
  readonly signal: AbortSignal
}

/** One member's view of a collective group being created. */
export interface GroupSetup {
  readonly name: string
  readonly rank: number
  readonly worldSize: number
  /** Actor ids by rank. */
  readonly members: ReadonlyArray<string>
  readonly timeoutMs: number
  /**
   * Exchanges one blob per rank through tensorlane's control plane (e.g. pair addresses); resolves with
   * all blobs by rank. Each call is a round of the group's all-gather, whose later rounds are
   * `group(name).allGather` in the actors: every member makes the same calls in the same order.
   */
  readonly allGather: (blob: Uint8Array) => Promise<ReadonlyArray<Uint8Array>>
}

/** A collective operation inside a group, in place on every member's tensors. */
export interface CollectiveRequest extends WritesUntil {
  readonly group: string
  readonly tensors: ReadonlyArray<Tensor>
  readonly signal: AbortSignal
}

export type ReduceOp = "sum" | "product" | "min" | "max"

/** What a transport reports for `cluster.inspect()`. */
export interface TransportInspection {
  readonly registrations: ReadonlyArray<string>
}

export interface TensorTransport {
  /** Lowercase; what `tensorTransport` and `backend` name. */
  readonly name: string
  readonly capabilities: TransportCapabilities
  /** Producer side, when an object is created: returns metadata that travels with the object to its consumers. */
  readonly extractMetadata?: (object: TransportObject) => unknown | Promise<unknown>
  /** Producer side, when the last reference to an object is gone: drop registrations made for it. */
  readonly release?: (object: TransportObject) => void | Promise<void>
  /** One-sided transports: read the object's tensors into `into`. */
  readonly fetch?: (request: FetchRequest) => Promise<void>
  /** Two-sided transports: the producer sends every tensor of the object to `toRank`. */
  readonly send?: (request: SendRequest) => Promise<void>
  /** Two-sided transports: the consumer receives every tensor of the object into `into`. */
  readonly receive?: (request: ReceiveRequest) => Promise<void>
  /** Group transports: in-place allreduce of every member's tensors (same shapes and dtypes on all ranks). */
  readonly allreduce?: (request: CollectiveRequest & { readonly op: ReduceOp }) => Promise<void>
  /** Group transports: in-place broadcast of the root's tensors to every member. */
  readonly broadcast?: (request: CollectiveRequest & { readonly root: number }) => Promise<void>
  readonly createGroup?: (setup: GroupSetup) => Promise<void>
  readonly destroyGroup?: (name: string) => Promise<void>
  readonly inspect?: () => TransportInspection
  /** Called once when the process's agent stops, and for transports that work on any thread, when its main thread closes too. */
  readonly close?: () => void | Promise<void>
}

/** Marks a module export as a transport and checks its shape early (a typo in a plugin fails at load, not mid-transfer). */
export const defineTransport = <T extends TensorTransport>(transport: T): T => {
  if (transport.name !== transport.name.toLowerCase() || transport.name.length === 0) {
    throw new InvalidArgumentError({ message: `a transport name must be non-empty lowercase, got "${transport.name}"`, argument: "transport.name" })
  }
  const c = transport.capabilities
  if (c.oneSided && transport.fetch === undefined) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" declares oneSided but has no fetch()`, argument: "transport" })
  }
  if (!c.oneSided && (transport.send === undefined || transport.receive === undefined)) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" is two-sided but lacks send() or receive()`, argument: "transport" })
  }
  if (c.needsGroup && transport.createGroup === undefined) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" needs a group but has no createGroup()`, argument: "transport" })
  }
  return transport
}

export const isTensorTransport = (value: unknown): value is TensorTransport =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as TensorTransport).name === "string" &&
  typeof (value as TensorTransport).capabilities === "object"
