/**
 * transport-nixl's Effect face: a pinned registration and a registered pool last as long as their
 * scope (deregistered, closed when it closes, a failure or not), and a pool is disposable.
 */
import { Tensor } from "@tensorlane/core"
import * as Effect from "effect/Effect"
import { describe, expect, it } from "vitest"
import { NixlEffect, type NixlMemoryPool, createNixlMemoryPool, nixl, nixlRegistrationRefs } from "../src/index.js"
import { tagOf, thrown } from "../../core/test/helpers/errors.ts"

const registrations = () => nixl.inspect!().registrations

describe("NixlEffect", () => {
  it("keeps a tensor's storage registered for the scope, and deregisters it when the scope closes on a failure too", async () => {
    const weight = Tensor.randn([64, 64])
    const inScope = await Effect.runPromise(Effect.scoped(Effect.map(NixlEffect.registration(weight.row(1)), () => nixlRegistrationRefs(weight))))
    expect([inScope, nixlRegistrationRefs(weight)]).toEqual([1, 0])
    const failed = Effect.scoped(Effect.andThen(NixlEffect.registration(weight), Effect.fail("stop" as const)))
    expect(await Effect.runPromise(Effect.flip(failed))).toBe("stop")
    expect(nixlRegistrationRefs(weight)).toBe(0)
  })

  it("closes a scoped pool when its scope closes: deregistered, allocating no more", async () => {
    let kept: NixlMemoryPool | undefined
    const used = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          kept = yield* NixlEffect.memoryPool({ capacity: 1 << 12, name: "effect" })
          const t = Tensor.empty([256], { allocator: kept })
          return [kept.registered, nixlRegistrationRefs(t), registrations().length]
        }),
      ),
    )
    expect(used).toEqual([true, 1, 1])
    expect([kept!.registered, registrations()]).toEqual([false, []])
    expect(tagOf(thrown(() => kept!.allocate(8)))).toBe("UnsupportedOperationError")
    const refused = await Effect.runPromise(Effect.flip(Effect.scoped(NixlEffect.memoryPool({ capacity: -1 }))))
    expect(refused._tag).toBe("ShapeError")
  })

  it("closes a pool that `using` declared", () => {
    let outside: NixlMemoryPool
    {
      using pool = createNixlMemoryPool({ capacity: 1 << 12 })
      outside = pool
      expect(pool.registered).toBe(true)
    }
    expect([outside.registered, registrations()]).toEqual([false, []])
  })
})
