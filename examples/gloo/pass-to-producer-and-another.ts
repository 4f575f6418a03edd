// A ref passed to its producer and to another actor: the producer's call works on the very tensor
// the other receives a copy of, so an in-place update there may or may not reach it. tensorlane
// warns of it, as Ray does.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

process.on("warning", (warning) => console.log(`${warning.name}: ${warning.message}`))

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using tensor = sender.randomTensor()
using sum1 = sender.incrementAndSumInPlace(tensor) // the very tensor, updated in place
using sum2 = receiver.incrementAndSumInPlace(tensor) // a copy, taken before or after that update
const [a, b] = await cluster.get([sum1, sum2])
const agree = Math.abs(a - b) < 1e-3 * Math.max(1, Math.abs(a))
console.log(agree ? "sender and receiver returned the same sums" : "sender and receiver returned different sums")
await group.destroy()
