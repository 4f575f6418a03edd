/**
 * The APIs an actor method uses on its own process: `put`, `get`, `waitTensorFreed`, `group` and
 * `cancellationSignal`.
 * They find the current actor by async context, from a method's code until it returns or its promise
 * settles (code it leaves running after that, a timer or a promise it does not await, may find no
 * actor, or the ended call); called in the driver they raise NotInActorError.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import { NotInActorError } from "./Errors.js"
import type { ObjectRef } from "./ObjectRef.js"
import type { Tensor } from "./Tensor.js"
import type { ReduceOp } from "./Transport.js"

export interface PutOptions {
  /** A one-sided transport (or "object-store", the default) that consumers read the value with. */
  readonly tensorTransport?: string
}

export interface GetOptions {
  /** Reject with TimeoutError after this long. Default: no limit. */
  readonly timeoutMs?: number
  /** Copy the value through the control plane instead of the object's own transport (needed for two-sided transports). */
  readonly useObjectStore?: boolean
  /**
   * Existing tensors to receive into, in the value's tensor order (depth first, insertion order):
   * each of the shape and dtype it receives, contiguous, and sharing no memory with another (else ShapeError).
   */
  readonly target?: ReadonlyArray<Tensor>
}

export interface WaitTensorFreedOptions {
  readonly timeoutMs?: number
}

/** A collective group as seen from one of its members. */
export interface GroupMember {
  readonly name: string
  readonly backend: string
  readonly rank: number
  readonly worldSize: number
  /** In place on every member's tensors; every member calls it with tensors of the same shapes and dtypes. */
  readonly allreduce: (tensors: ReadonlyArray<Tensor>, options?: { readonly op?: ReduceOp; readonly timeoutMs?: number }) => Promise<void>
  /** In place: the root's tensors overwrite every other member's. */
  readonly broadcast: (tensors: ReadonlyArray<Tensor>, options: { readonly root: number; readonly timeoutMs?: number }) => Promise<void>
  /**
   * Every member's bytes, by rank, through the cluster's control plane (any backend, no tensors): for
   * agreeing on sizes, addresses or outcomes. Every member calls it the same number of times, in the
   * same order; a timeout or a dead member fails the call on every member.
   */
  readonly allGather: (blob: Uint8Array, options?: { readonly timeoutMs?: number }) => Promise<ReadonlyArray<Uint8Array>>
}

export interface ActorContext {
  readonly actorId: string
  readonly put: <T>(value: T, options?: PutOptions) => Promise<ObjectRef<T>>
  readonly get: (refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>, options?: GetOptions) => Promise<unknown>
  readonly waitTensorFreed: (tensor: Tensor, options?: WaitTensorFreedOptions) => Promise<void>
  readonly group: (name: string) => GroupMember
  /** Aborts when `cluster.cancel` cancels the call. */
  readonly signal: AbortSignal
}

const actorContext = new AsyncLocalStorage<ActorContext>()

// Where AsyncLocalStorage rides on async hooks (Node 20 and 22; Node 24 with
// --no-async-context-frame), once on they run for every promise of the process, and each full
// collection throws their optimised code away to be compiled again: on only while a method runs.
const onAsyncHooks = "_propagate" in AsyncLocalStorage.prototype
let methodsInContext = 0

/**
 * Runs an actor method with its context, for the APIs above to find from the method's code, before
 * and after its awaits, until it returns or its promise settles.
 */
export const runInActorContext = async <A>(context: ActorContext, method: () => A | PromiseLike<A>): Promise<A> => {
  if (!onAsyncHooks) return actorContext.run(context, method)
  methodsInContext++
  try {
    return await actorContext.run(context, method)
  } finally {
    methodsInContext--
    if (methodsInContext === 0) actorContext.disable()
  }
}

const current = (api: string): ActorContext => {
  const context = actorContext.getStore()
  if (context === undefined) {
    throw new NotInActorError({
      message: `${api}() works inside actor methods only; the driver uses the cluster's own methods (cluster.get, cluster.put, ...)`,
    })
  }
  return context
}

/** Stores a value in this actor and returns a ref the driver owns. */
export const put = <T>(value: T, options?: PutOptions): Promise<ObjectRef<T>> => current("put").put(value, options)

/** Resolves refs inside an actor (one-sided transports fetch directly; two-sided need useObjectStore). */
export function get<T>(ref: ObjectRef<T>, options?: GetOptions): Promise<T>
export function get<T extends ReadonlyArray<ObjectRef<unknown>>>(
  refs: T,
  options?: GetOptions,
): Promise<{ [K in keyof T]: T[K] extends ObjectRef<infer V> ? V : never }>
export function get(refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>, options?: GetOptions): Promise<unknown> {
  return current("get").get(refs, options)
}

/** Resolves once no object of this actor references the tensor's memory (safe to write in place). */
export const waitTensorFreed = (tensor: Tensor, options?: WaitTensorFreedOptions): Promise<void> =>
  current("waitTensorFreed").waitTensorFreed(tensor, options)

/** This actor's membership of a collective group. */
export const group = (name: string): GroupMember => current("group").group(name)

/**
 * The AbortSignal of the running call: it aborts, with a CancelledError as its reason, when the
 * driver cancels the call (`cluster.cancel(ref)`). A long method checks it (`signal.throwIfAborted()`)
 * or hands it to what it waits on; the call's ref has already failed with CancelledError, and
 * whatever the method returns is dropped.
 */
export const cancellationSignal = (): AbortSignal => current("cancellationSignal").signal

/** Id of the actor running the current method. */
export const currentActorId = (): string => current("currentActorId").actorId
