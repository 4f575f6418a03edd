// A ref passed back to the actor that produced it hands over the very same tensor: no copy.
import { start, Tensor } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using tensor = sender.randomTensor()
using sum1 = sender.sum(tensor) // no transfer
using sum2 = receiver.sum(tensor) // over gloo
const [a, b] = await cluster.get([sum1, sum2])
console.log(`same sums: ${Tensor.allclose(Tensor.from([a]), Tensor.from([b]))}`)
await group.destroy()
