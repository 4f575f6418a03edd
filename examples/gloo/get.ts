// get in the driver: the driver is in no gloo group, so it reads a copy through the control plane.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

using tensor = sender.randomTensor()
try {
  await cluster.get(tensor) // over gloo: refused, with the fix in the message
} catch (error) {
  console.log(`${(error as { _tag: string })._tag}: ${(error as Error).message}`)
}
const copy = await cluster.get(tensor, { useObjectStore: true })
console.log(`copy: ${copy}`)
await group.destroy()
