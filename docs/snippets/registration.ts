// Pin a registration for as long as the actor wants it; views of the pinned memory reuse it.
import { start } from "@tensorlane/core"
import { Worker } from "./actors.ts"
import { Weights } from "./weights.ts"

await using cluster = await start({ transports: ["@tensorlane/transport-nixl"] })
const [owner] = await cluster.spawn(Weights)
const [reader] = await cluster.spawn(Worker)
console.log(`pinned: ${await cluster.get(owner.pin())} reference`)
const shard = owner.shard(3) // a view of the pinned weights: no new registration
console.log(`shard sum: ${await cluster.get(reader.sum(shard))}`)
console.log(`registrations of the owner: ${(await cluster.inspect()).processes[owner.actorId].registrations.length}`)
console.log(`after unpinning: ${await cluster.get(owner.unpin())} reference (the shard's object)`)
shard.release()
// The in-place update waits until the shard's object is freed, then writes.
console.log(`updated sum: ${await cluster.get(owner.update(2))}`)
