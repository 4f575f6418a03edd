// A group can be destroyed and a new one created on the same actors.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })

for (const round of [1, 2]) {
  const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })
  using tensor = sender.randomTensor()
  using result = receiver.sum(tensor)
  console.log(`group ${group.name}, round ${round}: sum ${(await cluster.get(result)).toFixed(3)}`)
  await group.destroy()
}
