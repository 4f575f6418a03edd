// Memory in the Effect face: a CPU pool for the scope (closed when it closes), the allocator of
// every tensor an Effect makes.
import { Tensor, TensorlaneMemory } from "@tensorlane/core"
import * as Effect from "effect/Effect"

const program = Effect.gen(function* () {
  const pool = yield* TensorlaneMemory.cpuPool({ capacity: 1 << 20, name: "activations" })
  const t = yield* Effect.sync(() => Tensor.ones([64 * 1024])).pipe(TensorlaneMemory.withAllocator(pool))
  return `${t.storage.allocator.name}: ${pool.used} bytes used, sum ${t.sum()}`
})

console.log(await Effect.runPromise(Effect.scoped(program)))
