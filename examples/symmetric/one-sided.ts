// One-sided access between processes: each rank writes into its neighbour's copy of a symmetric
// tensor (peerTensor), and a symmetric tensor returned over the shm transport is read in place.
import { start } from "@tensorlane/core"
import { Rank } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
const ranks = await cluster.spawn(Rank, { count: 3 })
const group = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "ring" })
await Promise.all(ranks.map((r) => cluster.get(r.ring("ring"))))
for (const line of await Promise.all(ranks.map((r) => cluster.get(r.readRing("ring"))))) console.log(line)

await Promise.all(ranks.map((r) => cluster.get(r.keepOnHeap("ring", "float32"))))
using onHeap = ranks[2].heapTensor()
console.log(`rank 0 sums rank 2's heap tensor: ${await cluster.get(ranks[0].sum(onHeap))}`)
onHeap.release()
await Promise.all(ranks.map((r) => cluster.get(r.freeHeap())))
await group.destroy()
