// The quick start in the Effect face: the cluster is a scoped layer, the gloo group a scoped
// resource, and failures are typed errors that Effect.catchTag can pick out.
import { TensorlaneCluster } from "@tensorlane/core"
import { GlooEffect } from "@tensorlane/transport-gloo"
import * as Effect from "effect/Effect"
import { Worker } from "./actors.ts"

const program = Effect.gen(function* () {
  const [sender, receiver] = yield* TensorlaneCluster.spawn(Worker, { count: 2 })
  yield* GlooEffect.group([sender, receiver]) // destroyed when the scope closes
  const ref = sender.randomTensor()
  const sum = yield* TensorlaneCluster.get(receiver.sum(ref))
  // The driver is in no gloo group: a plain get fails, typed, and the copy comes through the control plane.
  const copy = yield* TensorlaneCluster.get(ref).pipe(
    Effect.catchTag("UnsupportedOperationError", () => TensorlaneCluster.get(ref, { useObjectStore: true })),
  )
  return `sum computed by the receiver: ${sum.toFixed(3)}; the driver's copy agrees: ${Math.abs(copy.sum() - sum) < 1e-6 * Math.abs(sum) + 1e-6}`
})

console.log(await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(GlooEffect.layer()))))
