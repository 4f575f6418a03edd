/**
 * The Effect face of transport-nccl: a layer that adds nccl to a cluster layer, core's cluster layer
 * with nccl loaded, the pool and its scopes as scoped resources (a pool closed, a scope's
 * registration made, when their scope closes), and the other operations as Effects that fail with
 * the errors each can raise.
 */
import {
  type DeviceError,
  type InvalidSettingError,
  type MissingGroupError,
  type NativeLibraryError,
  type NotInActorError,
  type ProtocolError,
  type ShapeError,
  type StartOptions,
  TensorlaneCluster,
  TensorlaneMemory,
  type TimeoutError,
  type TransferError,
  type UnsupportedOperationError,
} from "@tensorlane/core"
import { attempt } from "@tensorlane/core/plugin"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
import { PACKAGE } from "./Loader.js"
import { type NcclStatus, ncclStatus as statusOf } from "./ncclStatus.js"

/**
 * Registering a pool with a group, or deregistering it: the group unknown here, NCCL or its
 * communicators failing (rolled back on every rank), the ranks' exchange failing.
 */
export type PoolRegistrationFailure =
  | NcclTransportError
  | NotInActorError
  | MissingGroupError
  | UnsupportedOperationError
  | TimeoutError
  | TransferError
  | ProtocolError
  | NativeLibraryError

/** Adds nccl to the cluster layer it is provided to (it merges with other transports' layers). */
export const transport: Layer.Layer<never> = TensorlaneCluster.transport(PACKAGE)

/** A cluster for the layer's scope, with nccl loaded beside `options.transports`. */
export const layer = (options: StartOptions = {}): Layer.Layer<TensorlaneCluster.TensorlaneCluster, TensorlaneCluster.StartFailure> =>
  TensorlaneCluster.layer(options).pipe(Layer.provide(transport))

export const ncclStatus: Effect.Effect<NcclStatus, NativeLibraryError> = attempt(statusOf)

/**
 * A pool for the scope, closed when the scope closes (a pool still registered or in use then is a
 * defect: deregister it and free its tensors inside the scope). Its options are checked here; its
 * memory comes with its first allocation.
 */
export const createNcclMemPool = (options?: NcclMemPoolOptions): Effect.Effect<NcclMemPool, InvalidSettingError | DeviceError | ShapeError, Scope.Scope> =>
  TensorlaneMemory.scoped(() => createPool(options))

export const registerMemPool = (pool: NcclMemPool, group: PoolGroup | string, options?: RegistrationOptions): Effect.Effect<void, PoolRegistrationFailure> =>
  attempt(() => registerPromise(pool, group, options))

export const deregisterMemPool = (
  pool: NcclMemPool,
  group: PoolGroup | string,
  options?: Pick<RegistrationOptions, "timeoutMs">,
): Effect.Effect<void, PoolRegistrationFailure> => attempt(() => deregisterPromise(pool, group, options))

const scoped = (enter: () => Promise<NcclMemScope>): Effect.Effect<NcclMemScope, PoolRegistrationFailure, Scope.Scope> =>
  Effect.acquireRelease(attempt(enter), (s) => Effect.orDie(attempt(() => s[Symbol.asyncDispose]())))

/** ncclMem as a scoped resource: registration happens when the scope closes (a failure there is a defect of the release). */
export const ncclMem = (pool: NcclMemPool, options?: NcclMemOptions): Effect.Effect<NcclMemScope, PoolRegistrationFailure, Scope.Scope> =>
  scoped(() => ncclMemPromise(pool, options))

export const multiGroupMemPool = (
  pool: NcclMemPool,
  groups: ReadonlyArray<PoolGroup | string>,
  options?: RegistrationOptions & { readonly mode?: RegistrationMode },
): Effect.Effect<NcclMemScope, PoolRegistrationFailure, Scope.Scope> => scoped(() => multiGroupPromise(pool, groups, options))
