// The Effect face: one cluster layer that loads the Effect-style example transport and gloo, each
// added by a layer of its own, and a tensor moved over the Effect-style transport.
import { TensorlaneCluster } from "@tensorlane/core"
import { GlooEffect } from "@tensorlane/transport-gloo"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Worker } from "./actors.ts"

const transports = Layer.mergeAll(GlooEffect.transport, TensorlaneCluster.transport("@tensorlane-examples/transport-tcp/effect"))
const clusterLayer = TensorlaneCluster.layer().pipe(Layer.provide(transports))

const program = Effect.gen(function* () {
  const [producer, consumer] = yield* TensorlaneCluster.spawn(Worker, { count: 2 })
  const ref = producer.make.options({ tensorTransport: "tcp-effect" })(1 << 20)
  const sum = yield* TensorlaneCluster.get(consumer.sum(ref))
  const cluster = yield* TensorlaneCluster.TensorlaneCluster
  return `sum over tcp-effect: ${sum}\ntransports: ${cluster.transportNames.join(", ")}`
})

console.log(await Effect.runPromise(program.pipe(Effect.provide(clusterLayer))))
