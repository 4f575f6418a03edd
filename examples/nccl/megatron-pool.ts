// Seed 003: Megatron-Core's MultiGroupMemPoolAllocator. One NCCL memory pool registered with several
// communicator groups: trainer 0 is in a data-parallel group with trainer 1 and in an
// expert-parallel group with trainer 2 (a pair of actors shares at most one group per backend, so
// the groups differ by their second member). Registration is collective per group, all-or-nothing
// across its members, in one canonical order of groups. Needs three GPUs.
import { start } from "@tensorlane/core"
import { ownGpu, runExample } from "./gpus.ts"
import { Trainer } from "./poolActors.ts"

await runExample(async () => {
  await using cluster = await start({ transports: ["@tensorlane/transport-nccl"] })
  const trainers = [...(await cluster.spawn(Trainer, ownGpu(0))), ...(await cluster.spawn(Trainer, ownGpu(1))), ...(await cluster.spawn(Trainer, ownGpu(2)))]
  const dp = await cluster.createCollectiveGroup([trainers[0], trainers[1]], { backend: "nccl", name: "dp" })
  const ep = await cluster.createCollectiveGroup([trainers[0], trainers[2]], { backend: "nccl", name: "ep" })
  const groupsOf = [["dp", "ep"], ["dp"], ["ep"]]

  await Promise.all(trainers.map((t) => cluster.get(t.createPool())))
  const allocated = await Promise.all(trainers.map((t, i) => cluster.get(t.allocate(groupsOf[i]))))
  allocated.forEach((a, i) => console.log(`trainer ${i}: ${a.used} bytes in ${a.segments} segment(s)`))
  const registered = await Promise.all(trainers.map((t) => cluster.get(t.registrations())))
  registered.forEach((r, i) => console.log(`trainer ${i} registered with: ${JSON.stringify(r)}`))

  await Promise.all(trainers.map((t, i) => cluster.get(t.release(groupsOf[i]))))
  await dp.destroy()
  await ep.destroy()
})
