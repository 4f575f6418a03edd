/**
 * The Effect face of transport-nccl: the same operations as Effects whose failures are the typed
 * errors (`_tag`s NoCudaDeviceError, NcclVersionError, NcclError, NcclRegistrationError and core's),
 * and the pool scopes as scoped resources (entered on acquire, registered on release).
 */
import { type TensorlaneError } from "@tensorlane/core"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { NcclTransportError } from "./Errors.js"
import { type PoolGroup, type RegistrationOptions, deregisterMemPool as deregisterPromise, registerMemPool as registerPromise } from "./MemPoolRegistration.js"
import {
  type NcclMemOptions,
  type NcclMemScope,
  type RegistrationMode,
  multiGroupMemPool as multiGroupPromise,
  ncclMem as ncclMemPromise,
} from "./MemPoolScopes.js"
import { type NcclMemPool, type NcclMemPoolOptions, createNcclMemPool as createPool } from "./NcclMemPool.js"
import { type NcclStatus, ncclStatus as statusOf } from "./ncclStatus.js"

export type NcclFailure = NcclTransportError | TensorlaneError

const isTagged = (error: unknown): error is NcclFailure =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string"

/** Typed errors are failures; anything else (a bug) is a defect. */
const attempt = <A>(run: () => A | Promise<A>): Effect.Effect<A, NcclFailure> =>
  Effect.tryPromise({ try: async () => run(), catch: (error) => error }).pipe(
    Effect.catch((error) => (isTagged(error) ? Effect.fail(error) : Effect.die(error))),
  )

export const ncclStatus: Effect.Effect<NcclStatus, NcclFailure> = Effect.suspend(() => attempt(statusOf))

export const createNcclMemPool = (options?: NcclMemPoolOptions): Effect.Effect<NcclMemPool, NcclFailure> => attempt(() => createPool(options))

export const registerMemPool = (pool: NcclMemPool, group: PoolGroup | string, options?: RegistrationOptions): Effect.Effect<void, NcclFailure> =>
  attempt(() => registerPromise(pool, group, options))

export const deregisterMemPool = (pool: NcclMemPool, group: PoolGroup | string, options?: Pick<RegistrationOptions, "timeoutMs">): Effect.Effect<void, NcclFailure> =>
  attempt(() => deregisterPromise(pool, group, options))

const scoped = (enter: () => Promise<NcclMemScope>): Effect.Effect<NcclMemScope, NcclFailure, Scope.Scope> =>
  Effect.acquireRelease(attempt(enter), (s) => attempt(async () => { await s[Symbol.asyncDispose]() }).pipe(Effect.orDie))

/** ncclMem as a scoped resource: registration happens when the scope closes (a failure there is a defect of the release). */
export const ncclMem = (pool: NcclMemPool, options?: NcclMemOptions): Effect.Effect<NcclMemScope, NcclFailure, Scope.Scope> =>
  scoped(() => ncclMemPromise(pool, options))

export const multiGroupMemPool = (
  pool: NcclMemPool,
  groups: ReadonlyArray<PoolGroup | string>,
  options?: RegistrationOptions & { readonly mode?: RegistrationMode },
): Effect.Effect<NcclMemScope, NcclFailure, Scope.Scope> => scoped(() => multiGroupPromise(pool, groups, options))
