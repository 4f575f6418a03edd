/**
 * The Effect face of transport-nixl: a layer that adds nixl to a cluster layer, core's cluster layer
 * with nixl loaded, pinned registrations and registered pools as scoped resources (deregistered and
 * closed when their scope closes), and the status as an Effect.
 */
import {
  type CpuMemoryPoolOptions,
  type DeviceError,
  type InvalidSettingError,
  type NativeLibraryError,
  type ObjectFreedError,
  type OutOfMemoryError,
  type ShapeError,
  type StartOptions,
  type Tensor,
  TensorlaneCluster,
  TensorlaneMemory,
  type TransferError,
  type UnsupportedOperationError,
} from "@tensorlane/core"
import { attempt } from "@tensorlane/core/plugin"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { type NixlMemoryPool, createNixlMemoryPool } from "./NixlMemoryPool.js"
import { PACKAGE } from "./Loader.js"
import { type NixlStatus, nixlStatus as statusOf } from "./nixlStatus.js"
import { deregisterNixlMemory, registerNixlMemory } from "./registerNixlMemory.js"

/** Loading NIXL: its library, or a setting it does not accept. */
export type NixlLoadFailure = NativeLibraryError | InvalidSettingError

/** Registering memory: loading NIXL, memory it cannot reach or that was freed, or NIXL refusing the registration. */
export type NixlRegistrationFailure = NixlLoadFailure | DeviceError | ObjectFreedError | UnsupportedOperationError | TransferError

/** Adds nixl to the cluster layer it is provided to (it merges with other transports' layers). */
export const transport: Layer.Layer<never> = TensorlaneCluster.transport(PACKAGE)

/** A cluster for the layer's scope, with nixl loaded beside `options.transports`. */
export const layer = (options: StartOptions = {}): Layer.Layer<TensorlaneCluster.TensorlaneCluster, TensorlaneCluster.StartFailure> =>
  TensorlaneCluster.layer(options).pipe(Layer.provide(transport))

/** `registerNixlMemory` for the scope: the tensor's storage stays registered until the scope closes. */
export const registration = (tensor: Tensor): Effect.Effect<void, NixlRegistrationFailure, Scope.Scope> =>
  Effect.acquireRelease(attempt(() => registerNixlMemory(tensor)), () => Effect.sync(() => deregisterNixlMemory(tensor)))

/** `createNixlMemoryPool` for the scope: closed (deregistered) when the scope closes. */
export const memoryPool = (options: CpuMemoryPoolOptions): Effect.Effect<NixlMemoryPool, ShapeError | OutOfMemoryError | NixlRegistrationFailure, Scope.Scope> =>
  TensorlaneMemory.scoped(() => createNixlMemoryPool(options))

/** The NIXL library this process loaded, its agent and registrations. */
export const nixlStatus: Effect.Effect<NixlStatus, NixlLoadFailure> = attempt(statusOf)
