/**
 * The tensor transport plugin API. A transport module exports a `TensorTransport` (as its default
 * export or a named one); every process of a cluster imports the same module by specifier and runs
 * the transport inside its transfer agent, a worker thread that keeps moving bytes while the
 * process's main JS thread is busy.
 *
 * The contract is Effect: every hook returns an Effect that fails with the errors it can raise, and a
 * registration lasts as long as its scope. `defineEffectTransport` checks one written that way;
 * `defineTransport` marks one written with Promises and adapts it to the contract (its `effect`),
 * whose functions the runtime then calls directly (no fiber per transfer).
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import {
  type ActorDiedError,
  type DTypeError,
  type DeviceError,
  type GroupConflictError,
  InvalidArgumentError,
  type InvalidSettingError,
  type MessageTooLargeError,
  type MissingGroupError,
  type NativeLibraryError,
  type ObjectFreedError,
  type OutOfMemoryError,
  type PackageError,
  type ProtocolError,
  type ShapeError,
  type TimeoutError,
  type TransferError,
  type UnsupportedOperationError,
} from "./Errors.js"
import type { Storage } from "./Allocator.js"
import type { Tensor } from "./Tensor.js"
import { attempt } from "./internal/attempt.js"
import type { TensorMeta } from "./internal/wireMetas.js"

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
   * buffers once it ended (its Effect, or its promise) and every promise it handed to the request's
   * `writesUntil` settled too. The runtime keeps the memory of a failed transfer out of reuse until
   * then, and only until then; without this, for the life of the process (it cannot know what a
   * transport still writes).
   */
  readonly tracksBuffers?: boolean
  /**
   * Its peers must be on one machine (shared memory): in a cluster across hosts, a transfer or group
   * between two hosts fails with CrossHostError before the transport is called.
   */
  readonly sameHost?: boolean
  /**
   * A value whose tensors are all in host memory and hold 64 KiB or less together skips the transport:
   * a copy travels inside the producer's result (or put) message to the owner, and on to consumers
   * inside their calls, as object-store's small values do. For transports whose transfer costs thread
   * wake-ups and messages of its own on both sides, more than such a copy; the value then stays
   * readable after its producer dies.
   */
  readonly inlinesSmallValues?: boolean
}

/** Part of every request whose buffers a transport writes. */
export interface WritesUntil {
  /**
   * Set by the runtime (absent when a program calls the transport itself). A transport whose native
   * side may go on writing the buffers after its hook ended (an aborted receive that stays posted
   * until its connection closes) passes, before the hook ends, a promise that settles once it no
   * longer can.
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

/**
 * What a transfer (fetch, send, receive, allreduce, broadcast) can fail with: the runtime's abort
 * (TimeoutError, TransferError), what arrives from a peer (ProtocolError, ObjectFreedError), tensors
 * or groups the transport cannot take, its native library, and the transport package's own errors.
 */
export type TransferFailure =
  | TransferError
  | TimeoutError
  | ProtocolError
  | ObjectFreedError
  | MissingGroupError
  | DeviceError
  | ShapeError
  | DTypeError
  | UnsupportedOperationError
  | NativeLibraryError
  | InvalidSettingError
  | PackageError

/** What registering an object's tensors can fail with. */
export type RegistrationFailure =
  | TransferError
  | DeviceError
  | OutOfMemoryError
  | ProtocolError
  | UnsupportedOperationError
  | NativeLibraryError
  | InvalidSettingError
  | PackageError

/** What creating a group can fail with: its rendezvous (`setup.allGather`) and connecting the members. */
export type GroupFailure =
  | GroupConflictError
  | TransferError
  | TimeoutError
  | ProtocolError
  | MessageTooLargeError
  | ActorDiedError
  | DeviceError
  | UnsupportedOperationError
  | NativeLibraryError
  | InvalidSettingError
  | PackageError

/** What destroying a group can fail with. */
export type DestroyGroupFailure = TransferError | TimeoutError | PackageError

/**
 * The contract: a transport whose hooks are Effects. Make one with `defineEffectTransport` or
 * `defineTransport`. Requests are the same plain objects either way: a request's `signal` aborts on
 * a timeout or a dead peer, and the runtime then interrupts the hook's Effect too.
 */
export interface TensorTransport {
  readonly [TransportTypeId]: TransportTypeId
  /** Lowercase; what `tensorTransport` and `backend` name. */
  readonly name: string
  readonly capabilities: TransportCapabilities
  /**
   * Producer side, when an object is created: registers its tensors for as long as the scope lasts
   * (it closes once the last reference to the object is gone) and returns metadata that travels with
   * the object to its consumers.
   */
  readonly register?: (object: TransportObject) => Effect.Effect<unknown, RegistrationFailure, Scope.Scope>
  /** One-sided transports: read the object's tensors into `into`. */
  readonly fetch?: (request: FetchRequest) => Effect.Effect<void, TransferFailure>
  /** Two-sided transports: the producer sends every tensor of the object to `toRank`. */
  readonly send?: (request: SendRequest) => Effect.Effect<void, TransferFailure>
  /** Two-sided transports: the consumer receives every tensor of the object into `into`. */
  readonly receive?: (request: ReceiveRequest) => Effect.Effect<void, TransferFailure>
  /** Group transports: in-place allreduce of every member's tensors (same shapes and dtypes on all ranks). */
  readonly allreduce?: (request: CollectiveRequest & { readonly op: ReduceOp }) => Effect.Effect<void, TransferFailure>
  /** Group transports: in-place broadcast of the root's tensors to every member. */
  readonly broadcast?: (request: CollectiveRequest & { readonly root: number }) => Effect.Effect<void, TransferFailure>
  readonly createGroup?: (setup: GroupSetup) => Effect.Effect<void, GroupFailure>
  readonly destroyGroup?: (name: string) => Effect.Effect<void, DestroyGroupFailure>
  readonly inspect?: () => TransportInspection
  /**
   * Whether this host storage's memory is registered with the transport already (pinned by the user,
   * or held by a live object): its tensors then travel as they are, never copied into a packed block,
   * which would take a registration of its own.
   */
  readonly registered?: (storage: Storage) => boolean
  /**
   * One-time setup whose cost the first transfer would pay otherwise (loading a native library,
   * starting an agent). Each actor process runs it once, in its transfer agent, as the actor starts;
   * it cannot fail: what it could not do, the first transfer that needs it does again and raises.
   */
  readonly prepare?: Effect.Effect<void>
  /** Run once when the process's agent stops, and for transports that work on any thread, when its main thread closes too. */
  readonly close?: Effect.Effect<void>
  /** A transport written with Promises (`defineTransport`): its own functions, which the runtime calls directly. */
  readonly promise?: PromiseTransport
}

/**
 * A transport written with Promises, the shape `defineTransport` takes: a hook that throws or
 * rejects fails as `TensorTransport`'s does.
 */
export interface PromiseTransport {
  readonly name: string
  readonly capabilities: TransportCapabilities
  /** Producer side, when an object is created: returns metadata that travels with the object to its consumers. */
  readonly extractMetadata?: (object: TransportObject) => unknown | Promise<unknown>
  /** Producer side, when the last reference to an object is gone: drop registrations made for it. */
  readonly release?: (object: TransportObject) => void | Promise<void>
  readonly fetch?: (request: FetchRequest) => Promise<void>
  readonly send?: (request: SendRequest) => Promise<void>
  readonly receive?: (request: ReceiveRequest) => Promise<void>
  readonly allreduce?: (request: CollectiveRequest & { readonly op: ReduceOp }) => Promise<void>
  readonly broadcast?: (request: CollectiveRequest & { readonly root: number }) => Promise<void>
  readonly createGroup?: (setup: GroupSetup) => Promise<void>
  readonly destroyGroup?: (name: string) => Promise<void>
  readonly inspect?: () => TransportInspection
  readonly registered?: (storage: Storage) => boolean
  /** As `TensorTransport.prepare`; what it throws or rejects with is ignored. */
  readonly prepare?: () => void | Promise<void>
  readonly close?: () => void | Promise<void>
}

export const TransportTypeId: unique symbol = Symbol.for("@tensorlane/core/TensorTransport")
export type TransportTypeId = typeof TransportTypeId

/** The hooks a transport's capabilities require: a typo in a plugin fails at load, not mid-transfer. */
const checkHooks = (transport: { readonly name: string; readonly capabilities: TransportCapabilities }, has: (hook: "fetch" | "send" | "receive" | "createGroup") => boolean): void => {
  if (transport.name !== transport.name.toLowerCase() || transport.name.length === 0) {
    throw new InvalidArgumentError({ message: `a transport name must be non-empty lowercase, got "${transport.name}"`, argument: "transport.name" })
  }
  const c = transport.capabilities
  if (c.oneSided && !has("fetch")) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" declares oneSided but has no fetch()`, argument: "transport" })
  }
  if (!c.oneSided && (!has("send") || !has("receive"))) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" is two-sided but lacks send() or receive()`, argument: "transport" })
  }
  if (c.needsGroup && !has("createGroup")) {
    throw new InvalidArgumentError({ message: `transport "${transport.name}" needs a group but has no createGroup()`, argument: "transport" })
  }
}

/** Checks a transport written in Effect and marks it as one. */
export const defineEffectTransport = (transport: Omit<TensorTransport, TransportTypeId | "promise">): TensorTransport => {
  checkHooks(transport, (hook) => transport[hook] !== undefined)
  return { ...transport, [TransportTypeId]: TransportTypeId }
}

/** A transport written with Promises, as `defineTransport` returns it: callable as written, its contract beside. */
export type DefinedTransport<P extends PromiseTransport = PromiseTransport> = P & { readonly effect: TensorTransport }

/**
 * Marks a transport written with Promises as one, checked as `defineEffectTransport` checks, and
 * adapts it to the contract, which `effect` holds: each hook an Effect (typed errors are failures,
 * anything else a defect), `extractMetadata` with `release` a scoped registration, and the object
 * itself as the contract's `promise`. The object is returned as it is, so its hooks stay callable.
 */
export const defineTransport = <P extends PromiseTransport>(transport: P): DefinedTransport<P> => {
  if (isTensorTransport((transport as Partial<DefinedTransport>).effect)) return transport as DefinedTransport<P>
  checkHooks(transport, (hook) => transport[hook] !== undefined)
  const p: PromiseTransport = transport
  const contract: TensorTransport = {
    [TransportTypeId]: TransportTypeId,
    name: p.name,
    capabilities: p.capabilities,
    ...(p.extractMetadata !== undefined || p.release !== undefined
      ? {
          register: (object) =>
            Effect.acquireRelease(attempt<unknown, RegistrationFailure>(() => p.extractMetadata?.(object)), () =>
              Effect.orDie(attempt(() => p.release?.(object))),
            ),
        }
      : {}),
    ...(p.fetch === undefined ? {} : { fetch: (request) => attempt(() => p.fetch!(request)) }),
    ...(p.send === undefined ? {} : { send: (request) => attempt(() => p.send!(request)) }),
    ...(p.receive === undefined ? {} : { receive: (request) => attempt(() => p.receive!(request)) }),
    ...(p.allreduce === undefined ? {} : { allreduce: (request) => attempt(() => p.allreduce!(request)) }),
    ...(p.broadcast === undefined ? {} : { broadcast: (request) => attempt(() => p.broadcast!(request)) }),
    ...(p.createGroup === undefined ? {} : { createGroup: (setup) => attempt(() => p.createGroup!(setup)) }),
    ...(p.destroyGroup === undefined ? {} : { destroyGroup: (name) => attempt(() => p.destroyGroup!(name)) }),
    ...(p.inspect === undefined ? {} : { inspect: () => p.inspect!() }),
    ...(p.registered === undefined ? {} : { registered: (storage) => p.registered!(storage) }),
    ...(p.prepare === undefined ? {} : { prepare: Effect.catchCause(attempt(() => p.prepare!()), () => Effect.void) }),
    ...(p.close === undefined ? {} : { close: Effect.orDie(attempt(() => p.close!())) }),
    promise: p,
  }
  return Object.defineProperty(transport, "effect", { value: contract }) as DefinedTransport<P>
}

/** A transport made by `defineTransport` or `defineEffectTransport` (any copy of core's). */
export const isTensorTransport = (value: unknown): value is TensorTransport =>
  typeof value === "object" && value !== null && (value as Partial<TensorTransport>)[TransportTypeId] === TransportTypeId
