// The fix for the mutability example: the sender waits until no object uses the tensor before writing it.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

const tensor = sender.randomTensorKept()
// 1. The sender waits in this call until every ref to the tensor is gone, so no get() here: it would deadlock.
using updated = sender.incrementAndSumStoredTensorSafely()
using received = receiver.incrementAndSum(tensor)
// 2. Drop the driver's ref so that the wait can end once the receiver's call has its copy.
tensor.release()
const [sum1, sum2] = await cluster.get([updated, received])
console.log(Math.abs(sum1 - sum2) < 1e-3 * Math.abs(sum1) ? "sender and receiver returned the same sums" : "different sums")
await group.destroy()
