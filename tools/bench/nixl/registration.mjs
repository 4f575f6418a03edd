/**
 * Registration cost of 1000 views against one storage (register_nixl_memory's case), in one process through
 * the transport's own producer path (extractMetadata / release):
 *   views      1000 row views of one [1000, 1000] float32 storage in one object: 1 registration
 *   pinned     the same after registerNixlMemory(weight): 0 registrations per object
 *   storages   1000 separate [1000] storages in one object: 1000 registrations (the cost avoided)
 *   npm run build, then node --expose-gc tools/bench/nixl/registration.mjs  (REPEATS=7)
 */
import { Tensor } from "@tensorlane/core"
import { deregisterNixlMemory, nixl, registerNixlMemory } from "@tensorlane/transport-nixl"

const REPEATS = Number(process.env.REPEATS ?? 7)
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
let next = 0

const measure = async (tensors) => {
  const times = []
  for (let i = 0; i < REPEATS + 1; i++) {
    const objectId = `bench.${next++}`
    const started = performance.now()
    const metadata = await nixl.extractMetadata({ objectId, tensors })
    const registered = performance.now() - started
    await nixl.release({ objectId, tensors })
    if (i > 0) times.push(registered)
    if (metadata.regions.length === 0) throw new Error("no region")
  }
  return median(times)
}

const weight = Tensor.randn([1000, 1000])
// The first registration creates the process's NIXL agent: keep that out of the figures.
await measure([Tensor.zeros([16])])
const views = Array.from({ length: 1000 }, (_, i) => weight.row(i))
const viewsMs = await measure(views)
registerNixlMemory(weight)
const pinnedMs = await measure(views)
deregisterNixlMemory(weight)
const storages = Array.from({ length: 1000 }, () => Tensor.randn([1000]))
const storagesMs = await measure(storages)
const row = (name, ms, registrations) => console.log(`${name.padEnd(44)} ${ms.toFixed(3).padStart(9)} ms  (${registrations})`)
console.log(`median of ${REPEATS}, one object each, extractMetadata (register + metadata):`)
row("1000 views of one 4 MB storage", viewsMs, "1 NIXL registration")
row("1000 views, storage pinned (registerNixlMemory)", pinnedMs, "0 registrations, 1 reference")
row("1000 separate 4 KB storages", storagesMs, "1000 NIXL registrations")
console.log(`remaining registrations: ${nixl.inspect().registrations.length}`)
