/**
 * How long a fresh cluster takes before its first call, phase by phase, in ms: importing
 * @tensorlane/core, `start()` (the driver's runtime and the transport's module), spawning `actors`
 * LoopWorker actors in one `spawn`, a group of them where the transport needs one, and the first
 * 4 KiB call between the first two (none with one actor). One JSON line; run it several times,
 * alternating the builds compared, and on both Nodes (Node's compile cache exists from 22.8).
 *
 *   node tools/bench/calls/clusterStart.mjs [actors] [transport]
 */
import { performance } from "node:perf_hooks"

const [actors = "2", transport = "gloo"] = process.argv.slice(2)
const count = Number(actors)
if (!Number.isInteger(count) || count < 1) throw new Error(`actors is a whole number from 1, not "${actors}"`)

const t0 = performance.now()
const { start } = await import("@tensorlane/core")
const { LoopWorker } = await import("./loopActors.mjs")
const { loopCall, transportModules } = await import("./loopCluster.mjs")
const imported = performance.now()
const cluster = await start({ transports: transportModules(transport) })
try {
  const started = performance.now()
  const spawned = await cluster.spawn(LoopWorker, { count })
  const ready = performance.now()
  if (count > 1 && cluster.runtime.transport(transport).capabilities.needsGroup) await cluster.createCollectiveGroup(spawned, { backend: transport })
  const grouped = performance.now()
  if (count > 1) await loopCall({ cluster, a: spawned[0], b: spawned[1] }, transport, 4096, "natural")()
  const called = performance.now()
  const ms = (from, to) => Number((to - from).toFixed(1))
  console.log(
    JSON.stringify({ node: process.version, actors: count, transport, importMs: ms(t0, imported), startMs: ms(imported, started), spawnMs: ms(started, ready), groupMs: ms(ready, grouped), firstCallMs: count > 1 ? ms(grouped, called) : null }),
  )
} finally {
  await cluster.shutdown()
}
