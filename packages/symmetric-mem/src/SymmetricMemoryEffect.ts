/**
 * The Effect face of symmetric memory: a layer that adds the shm transport to a cluster layer, the
 * collective calls as Effects that fail with the errors each can raise, and a scoped allocation
 * that frees collectively when its scope closes (every rank's scope must close in the same order,
 * as with freeSymmetric).
 */
import {
  type DType,
  type DTypeError,
  type DeviceError,
  type InvalidSettingError,
  type MessageTooLargeError,
  type MissingGroupError,
  type NativeLibraryError,
  type NotInActorError,
  type OutOfMemoryError,
  type PackageError,
  type ProtocolError,
  type ShapeError,
  type Tensor,
  TensorlaneCluster,
  type TimeoutError,
  type TransferError,
  type UnsupportedOperationError,
} from "@tensorlane/core"
import { attempt } from "@tensorlane/core/plugin"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { SymmetricBackendError, SymmetricFreeError, SymmetricMismatchError } from "./Errors.js"
import { type AllocateSymmetricOptions, type FreeSymmetricOptions, allocateSymmetric, freeSymmetric } from "./SymmetricMemory.js"
import { PACKAGE } from "./Loader.js"

/** The ranks' exchange failing: a member gone, too slow, or a statement that does not decode or fit. */
type ExchangeFailure = TimeoutError | TransferError | ProtocolError | MessageTooLargeError

/**
 * Allocating: the group unknown here, a shape, dtype or device refused (on any rank: every rank
 * fails), the ranks disagreeing, the heap full, the backend or its library failing (the nccl-window
 * backend raises transport-nccl's errors too).
 */
export type AllocationFailure =
  | SymmetricMismatchError
  | SymmetricBackendError
  | NotInActorError
  | MissingGroupError
  | UnsupportedOperationError
  | ShapeError
  | DTypeError
  | DeviceError
  | OutOfMemoryError
  | NativeLibraryError
  | InvalidSettingError
  | ExchangeFailure
  | PackageError

/** Freeing: a tensor it cannot free (on any rank: every rank fails), the ranks disagreeing, the backend failing. */
export type FreeFailure = SymmetricFreeError | SymmetricMismatchError | ExchangeFailure | PackageError

/** Every failure of the symmetric calls. */
export type SymmetricError = AllocationFailure | FreeFailure

/** Adds this package's `shm` transport to the cluster layer it is provided to. */
export const transport: Layer.Layer<never> = TensorlaneCluster.transport(PACKAGE)

export const allocate = (shape: ReadonlyArray<number>, dtype: DType, options: AllocateSymmetricOptions): Effect.Effect<Tensor, AllocationFailure> =>
  attempt(() => allocateSymmetric(shape, dtype, options))

export const free = (tensors: ReadonlyArray<Tensor>, options?: FreeSymmetricOptions): Effect.Effect<void, FreeFailure> =>
  attempt(() => freeSymmetric(...tensors, ...(options === undefined ? [] : [options])))

/** A symmetric tensor for the scope, freed (collectively) when it closes; a failed free is a defect. */
export const scoped = (shape: ReadonlyArray<number>, dtype: DType, options: AllocateSymmetricOptions): Effect.Effect<Tensor, AllocationFailure, Scope.Scope> =>
  Effect.acquireRelease(allocate(shape, dtype, options), (tensor) => Effect.orDie(free([tensor], { timeoutMs: options.timeoutMs })))
