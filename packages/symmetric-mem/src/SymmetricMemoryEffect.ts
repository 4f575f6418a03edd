/**
 * The Effect face of symmetric memory: the collective calls as Effects whose failures are the typed
 * errors (this package's and core's), and a scoped allocation that frees collectively when its scope
 * closes (every rank's scope must close in the same order, as with freeSymmetric).
 */
import type { DType, Tensor, TensorlaneError } from "@tensorlane/core"
import * as Effect from "effect/Effect"
import type { SymmetricBackendError, SymmetricFreeError, SymmetricMismatchError } from "./Errors.js"
import { type AllocateSymmetricOptions, type FreeSymmetricOptions, allocateSymmetric, freeSymmetric } from "./SymmetricMemory.js"

export type SymmetricError = SymmetricMismatchError | SymmetricFreeError | SymmetricBackendError | TensorlaneError

const isTagged = (error: unknown): error is SymmetricError => error instanceof Error && typeof (error as { _tag?: unknown })._tag === "string"

/** Typed errors are failures, anything else a defect. */
const attempt = <A>(run: () => Promise<A>): Effect.Effect<A, SymmetricError> =>
  Effect.tryPromise({ try: run, catch: (error) => error }).pipe(Effect.catch((error) => (isTagged(error) ? Effect.fail(error) : Effect.die(error))))

export const allocate = (shape: ReadonlyArray<number>, dtype: DType, options: AllocateSymmetricOptions): Effect.Effect<Tensor, SymmetricError> =>
  attempt(() => allocateSymmetric(shape, dtype, options))

export const free = (tensors: ReadonlyArray<Tensor>, options?: FreeSymmetricOptions): Effect.Effect<void, SymmetricError> =>
  attempt(() => freeSymmetric(...tensors, ...(options === undefined ? [] : [options])))

/** A symmetric tensor for the scope, freed (collectively) when it closes; a failed free is a defect. */
export const scoped = (shape: ReadonlyArray<number>, dtype: DType, options: AllocateSymmetricOptions) =>
  Effect.acquireRelease(allocate(shape, dtype, options), (tensor) => Effect.orDie(free([tensor], { timeoutMs: options.timeoutMs })))
