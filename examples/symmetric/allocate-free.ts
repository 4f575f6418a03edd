// Seed 002's first example: every rank allocates a float32 and a float64 (3, 3) tensor on the
// symmetric heap, then frees both (a collective call every rank makes).
import { start } from "@tensorlane/core"
import { Rank } from "./actors.ts"

await using cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
const ranks = await cluster.spawn(Rank, { count: 3 })
const group = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "heap" })
for (const line of await Promise.all(ranks.map((r) => cluster.get(r.allocateAndFree("heap"))))) console.log(line)
await group.destroy()
