/**
 * transport-gloo's Effect face: a program over GlooEffect.layer moves tensors over gloo, broadcasts,
 * gets its groups' conflicts as typed failures, and leaves no group once their scopes have closed.
 */
import { TensorlaneCluster, type TensorlaneError } from "@tensorlane/core"
import { GlooEffect } from "@tensorlane/transport-gloo"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { GlooWorker } from "./fixtures/glooActors.mjs"

describe("GlooEffect", () => {
  it("runs transfers, a broadcast and scoped groups over gloo; conflicts are typed failures; nothing is left", async () => {
    const program = Effect.gen(function* () {
      const [a, b, c] = yield* TensorlaneCluster.spawn(GlooWorker, { count: 3 })
      const inScope = yield* Effect.scoped(
        Effect.gen(function* () {
          const group = yield* GlooEffect.group([a, b, c], { name: "effect-group" })
          const conflict = yield* Effect.flip(GlooEffect.group([c, a]))
          const tensor = a.randomTensor()
          const sums = [a.sum(tensor), b.sum(tensor)]
          const [mine, theirs] = yield* TensorlaneCluster.getAll(sums)
          yield* TensorlaneCluster.broadcast(tensor, [b, c])
          const afterBroadcast = yield* TensorlaneCluster.inspect()
          for (const ref of [tensor, ...sums]) ref.release()
          return { group: group.name, conflict: (conflict as TensorlaneError)._tag, mine, theirs, copies: [b, c].map((r) => afterBroadcast.processes[r.actorId]?.received.includes(tensor.id)) }
        }),
      )
      const afterScope = yield* TensorlaneCluster.inspect()
      return { ...inScope, groupsLeft: afterScope.groups, objectsLeft: afterScope.objects }
    })
    const outcome = await Effect.runPromise(program.pipe(Effect.provide(GlooEffect.layer())))
    expect(outcome.group).toBe("effect-group")
    expect(outcome.conflict).toBe("GroupConflictError")
    expect(outcome.theirs).toBe(outcome.mine)
    expect(outcome.copies).toEqual([true, true])
    expect(outcome.groupsLeft).toEqual([])
    expect(outcome.objectsLeft).toEqual([])
  })

  it("reports the addon's status as an Effect", async () => {
    const status = await Effect.runPromise(GlooEffect.glooStatus)
    expect(status.glooVersion).toMatch(/\d/)
    expect(status.details.map(([label]) => label)).toEqual(["gloo", "addon"])
  })
})
