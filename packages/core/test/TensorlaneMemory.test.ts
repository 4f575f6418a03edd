/**
 * Tensor memory in Effect: the allocator scope of Effect code (a fiber's CurrentAllocator), which
 * synchronous tensor factories see as they see Promise code's `withAllocator`, the two nesting
 * either way; allocation as an Effect with typed failures; pools as scoped, disposable resources
 * with one release verb.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import { describe, expect, expectTypeOf, it } from "vitest"
import type { AllocationFailure, MemoryPool, Storage } from "../src/Allocator.js"
import { withAllocator } from "../src/AllocatorScope.js"
import { cpuAllocator, createCpuMemoryPool } from "../src/CpuMemory.js"
import { OutOfMemoryError, ShapeError, UnsupportedOperationError } from "../src/Errors.js"
import { Tensor } from "../src/Tensor.js"
import * as TensorlaneMemory from "../src/TensorlaneMemory.js"
import { thrown } from "./helpers/errors.ts"

const pool = (name: string): MemoryPool => createCpuMemoryPool({ capacity: 1 << 16, name })
const allocatorOf = (t: Tensor): string => t.storage.allocator.name

describe("the allocator scope of Effect code", () => {
  it("is what tensor factories use in the fiber, across its async steps and in fibers it forks", async () => {
    const a = pool("a")
    const program = Effect.gen(function* () {
      const first = Tensor.zeros([4])
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
      const later = Tensor.zeros([4])
      const forked = yield* Effect.forkChild(Effect.sync(() => Tensor.zeros([4])))
      return [first, later, yield* Fiber.join(forked)].map(allocatorOf)
    })
    expect(await Effect.runPromise(program.pipe(TensorlaneMemory.withAllocator(a)))).toEqual(["a", "a", "a"])
    expect(allocatorOf(Tensor.zeros([4]))).toBe("cpu")
  })

  it("keeps concurrent fibers apart, each with its own allocator", async () => {
    const made = (name: string) =>
      Effect.gen(function* () {
        const names: Array<string> = []
        for (let i = 0; i < 5; i++) {
          names.push(allocatorOf(Tensor.zeros([1])))
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        return names
      }).pipe(TensorlaneMemory.withAllocator(pool(name)))
    const [x, y] = await Effect.runPromise(Effect.all([made("x"), made("y")], { concurrency: 2 }))
    expect([x, y]).toEqual([Array(5).fill("x"), Array(5).fill("y")])
  })

  it("nests with withAllocator either way: the scope made inside the other wins", async () => {
    const outer = pool("outer")
    const inner = pool("inner")
    // An Effect scope inside Promise code's.
    const effectInside = await withAllocator(outer, () =>
      Effect.runPromise(Effect.sync(() => allocatorOf(Tensor.zeros([1]))).pipe(TensorlaneMemory.withAllocator(inner))),
    )
    // Promise code's scope inside an Effect scope, and the Effect scope again once it ends.
    const promiseInside = await Effect.runPromise(
      Effect.sync(() => [withAllocator(inner, () => allocatorOf(Tensor.zeros([1]))), allocatorOf(Tensor.zeros([1]))]).pipe(TensorlaneMemory.withAllocator(outer)),
    )
    // Promise code's scope seen by the Effect it runs, which sets none.
    const fromPromise = await withAllocator(outer, () => Effect.runPromise(Effect.sync(() => allocatorOf(Tensor.zeros([1])))))
    expect([effectInside, ...promiseInside, fromPromise]).toEqual(["inner", "inner", "outer", "outer"])
  })
})

describe("allocation and pools in Effect", () => {
  it("fails allocation with its typed errors", async () => {
    const small = createCpuMemoryPool({ capacity: 64 })
    expectTypeOf(TensorlaneMemory.allocate).returns.toEqualTypeOf<Effect.Effect<Storage, AllocationFailure>>()
    expect(await Effect.runPromise(Effect.flip(TensorlaneMemory.allocate(small, 128)))).toBeInstanceOf(OutOfMemoryError)
    expect(await Effect.runPromise(Effect.flip(TensorlaneMemory.allocate(cpuAllocator, -1)))).toBeInstanceOf(ShapeError)
    const storage = await Effect.runPromise(TensorlaneMemory.allocate(small, 8))
    await Effect.runPromise(TensorlaneMemory.free(small, storage))
    expect(small.used).toBe(0)
  })

  it("closes a scoped pool when its scope closes; a closed pool allocates no more", async () => {
    expectTypeOf(TensorlaneMemory.cpuPool).returns.toEqualTypeOf<Effect.Effect<MemoryPool, ShapeError | OutOfMemoryError, Scope.Scope>>()
    const kept = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const p = yield* TensorlaneMemory.cpuPool({ capacity: 1024, name: "scoped" })
          expect(allocatorOf(Tensor.zeros([4], { allocator: p }))).toBe("scoped")
          return p
        }),
      ),
    )
    expect(thrown(() => kept.allocate(8))).toBeInstanceOf(UnsupportedOperationError)
    expect(await Effect.runPromise(Effect.flip(Effect.scoped(TensorlaneMemory.cpuPool({ capacity: -1 }))))).toBeInstanceOf(ShapeError)
  })

  it("closes a pool with close(), using and await using alike, once", async () => {
    const closed = pool("closed")
    closed.close()
    closed.close()
    expect(thrown(() => closed.allocate(8))).toBeInstanceOf(UnsupportedOperationError)
    let outside: MemoryPool
    {
      using p = pool("using")
      outside = p
      p.allocate(8)
    }
    expect(thrown(() => outside.allocate(8))).toBeInstanceOf(UnsupportedOperationError)
    {
      await using p = pool("await using")
      outside = p
    }
    expect(thrown(() => outside.allocate(8))).toBeInstanceOf(UnsupportedOperationError)
  })
})
