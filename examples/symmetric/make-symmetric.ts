// Seed 002's second example: rank 0 asks for (3, 3), the others for (2, 3). Without makeSymmetric
// every rank fails; with it every rank gets a buffer of the largest size and a tensor of its own shape.
import { start } from "@tensorlane/core"
import { Rank } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
const ranks = await cluster.spawn(Rank, { count: 3 })
const group = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "uneven" })
for (const makeSymmetric of [false, true]) {
  console.log(`makeSymmetric: ${makeSymmetric}`)
  for (const line of await Promise.all(ranks.map((r) => cluster.get(r.makeSymmetric("uneven", makeSymmetric))))) console.log(`  ${line}`)
}
await group.destroy()
