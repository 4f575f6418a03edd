// One NCCL memory pool per trainer, registered with several groups: trainer 0 is in a data-parallel
// group with trainer 1 and an expert-parallel group with trainer 2. Needs three GPUs.
import { start } from "@tensorlane/core"
import { Trainer } from "./ncclTrainer.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-nccl"] })
const gpu = (i: number) => ({ env: { CUDA_VISIBLE_DEVICES: String(i) } }) // NCCL refuses two ranks on one GPU
const trainers = [...(await cluster.spawn(Trainer, gpu(0))), ...(await cluster.spawn(Trainer, gpu(1))), ...(await cluster.spawn(Trainer, gpu(2)))]
const dp = await cluster.createCollectiveGroup([trainers[0], trainers[1]], { backend: "nccl", name: "dp" })
const ep = await cluster.createCollectiveGroup([trainers[0], trainers[2]], { backend: "nccl", name: "ep" })
const groupsOf = [["dp", "ep"], ["dp"], ["ep"]]

await Promise.all(trainers.map((t) => cluster.get(t.createPool())))
const registered = await Promise.all(trainers.map((t, i) => cluster.get(t.gradients(groupsOf[i]))))
registered.forEach((r, i) => console.log(`trainer ${i} registered with: ${JSON.stringify(r)}`))
const staged = await cluster.get(trainers[0].staging())
console.log(`trainer 0 after staging: ${staged.segments} segments, registered ${JSON.stringify(staged.registered)}`)

await Promise.all(trainers.map((t, i) => cluster.get(t.release(groupsOf[i]))))
await dp.destroy()
await ep.destroy()
