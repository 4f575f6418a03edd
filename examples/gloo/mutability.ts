// Objects are mutable: an in-place update by the producer before the transfer reaches the receiver.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using tensor = sender.randomTensorKept()
using updated = sender.incrementAndSumStoredTensor()
const sum1 = await cluster.get(updated) // the update ran before the receiver's transfer
using received = receiver.incrementAndSum(tensor)
const sum2 = await cluster.get(received)
const agree = Math.abs(sum1 - sum2) < 1e-3 * Math.abs(sum1)
console.log(agree ? "sender and receiver returned the same sums" : "sender and receiver returned different sums")
await group.destroy()
