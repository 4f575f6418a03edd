// Several tensors inside one returned value: each stays in the sender and moves over gloo.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using dict = sender.randomTensorDict()
using result = receiver.sumDict(dict)
console.log(`sum of both tensors: ${(await cluster.get(result)).toFixed(3)}`)
await group.destroy()
