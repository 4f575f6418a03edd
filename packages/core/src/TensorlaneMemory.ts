/**
 * The Effect face of tensor memory: the allocator scope of Effect code (the `CurrentAllocator`
 * reference, which tensor factories read), an allocator's operations as Effects with the errors each
 * can raise, and memory pools as scoped resources, closed when their scope closes.
 */
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import type * as Scope from "effect/Scope"
import type { AllocationFailure, Allocator, FreeFailure, MemoryPool, Storage } from "./Allocator.js"
import { CurrentAllocator, innermostScope } from "./AllocatorScope.js"
import { type CpuMemoryPoolOptions, createCpuMemoryPool } from "./CpuMemory.js"
import type { OutOfMemoryError, ShapeError, TaggedError } from "./Errors.js"
import { attempt } from "./internal/attempt.js"

export { CurrentAllocator }
export type { AllocatorScope } from "./internal/allocatorState.js"

/**
 * `withAllocator` for Effect code: tensor factories that `self` runs allocate from `allocator` (for
 * its device) unless given an explicit allocator, in nested and forked fibers too.
 */
export const withAllocator: {
  (allocator: Allocator): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, allocator: Allocator): Effect.Effect<A, E, R>
} = dual(2, <A, E, R>(self: Effect.Effect<A, E, R>, allocator: Allocator) =>
  Effect.suspend(() => Effect.provideService(self, CurrentAllocator, { allocator, parent: innermostScope() })),
)

export const allocate = (allocator: Allocator, byteLength: number): Effect.Effect<Storage, AllocationFailure> =>
  attempt(() => allocator.allocate(byteLength))

export const free = (allocator: Allocator, storage: Storage): Effect.Effect<void, FreeFailure> => attempt(() => allocator.free(storage))

/**
 * The pool `make` creates, for the scope: closed when the scope closes (a close that throws, such as
 * an NCCL pool still registered, is a defect of the release). `E` is what `make` can raise.
 */
export const scoped = <P extends MemoryPool, E extends TaggedError>(make: () => P): Effect.Effect<P, E, Scope.Scope> =>
  Effect.acquireRelease(attempt<P, E>(make), (pool) => Effect.sync(() => pool.close()))

/**
 * `createCpuMemoryPool` for the scope; a capacity or alignment it does not take is a ShapeError, a
 * capacity the process cannot have an OutOfMemoryError.
 */
export const cpuPool = (options: CpuMemoryPoolOptions): Effect.Effect<MemoryPool, ShapeError | OutOfMemoryError, Scope.Scope> => scoped(() => createCpuMemoryPool(options))
