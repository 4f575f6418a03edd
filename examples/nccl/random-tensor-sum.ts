// Seed 001's NCCL example: a CUDA tensor produced by one actor and summed by another; it moves
// sender -> receiver over NCCL, GPU to GPU. Needs two GPUs.
import { start } from "@tensorlane/core"
import { MyActor } from "./actors.ts"
import { ownGpu, runExample } from "./gpus.ts"

await runExample(async () => {
  await using cluster = await start({ transports: ["@tensorlane/transport-nccl"] })
  const [sender] = await cluster.spawn(MyActor, ownGpu(0))
  const [receiver] = await cluster.spawn(MyActor, ownGpu(1))
  // The backend must match the tensorTransport of the method that returns the tensor.
  const group = await cluster.createCollectiveGroup([sender, receiver], { backend: "nccl" })

  using tensor = sender.randomTensor() // stays in `sender`'s GPU memory
  using result = receiver.sum(tensor)
  console.log(`sum: ${(await cluster.get(result)).toFixed(3)}`)
  await group.destroy()
})
