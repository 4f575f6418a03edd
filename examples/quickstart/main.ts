// The driver of the quick start: two actor processes in a gloo group; tensors move between them directly.
import { start } from "@tensorlane/core"
import { Worker } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-gloo"] })
const [sender, receiver] = await cluster.spawn(Worker, { count: 2 })
const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })

{
  // Refs are released when their `using` block ends (or by the garbage collector).
  using ref = sender.randomTensor() // an ObjectRef, returned at once; the tensor stays in `sender`
  using sum = receiver.sum(ref) // the tensor moves sender -> receiver over gloo when this call runs
  const total = await cluster.get(sum)
  console.log(`sum of a 1000x1000 randn tensor, computed by the receiver: ${total.toFixed(3)}`)

  // The driver is in no gloo group: it reads a copy through the control plane.
  const local = await cluster.get(ref, { useObjectStore: true })
  console.log(`the driver's copy agrees: ${Math.abs(local.sum() - total) < 1e-6 * Math.abs(total) + 1e-6}`)

  using dict = sender.tensorDict()
  using described = receiver.describe(dict) // refs may sit anywhere inside the arguments
  console.log(await cluster.get(described))
}

await group.destroy()
const { objects, processes } = await cluster.inspect()
const held = Object.values(processes).flatMap((p) => [...p.primary, ...p.received])
console.log(`after release: ${objects.length} objects tracked, ${held.length} tensors held by any process`)
