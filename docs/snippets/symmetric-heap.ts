// The symmetric heap over shared memory (nvmath-python's): the ranks allocate together, then each writes
// into its neighbour's copy; every rank then reads what its left neighbour wrote.
import { start } from "@tensorlane/core"
import { HeapRank } from "./heap.ts"

await using cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
const ranks = await cluster.spawn(HeapRank, { count: 3 })
const heap = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "heap" })
const shapes = await Promise.all(ranks.map((r) => cluster.get(r.allocate("heap"))))
console.log(`shapes: ${JSON.stringify(shapes)}`)
await Promise.all(ranks.map((r) => cluster.get(r.writeRight("heap"))))
console.log(`sums: ${(await Promise.all(ranks.map((r) => cluster.get(r.sum())))).join(", ")}`)
await Promise.all(ranks.map((r) => cluster.get(r.free())))
await heap.destroy()
