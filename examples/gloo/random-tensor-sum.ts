// A tensor produced by one actor and summed by another; it moves sender -> receiver over gloo.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using tensor = sender.randomTensor() // stays in `sender`
using result = receiver.sum(tensor)
console.log(`sum: ${(await cluster.get(result)).toFixed(3)}`)
await group.destroy()
