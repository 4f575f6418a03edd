/**
 * How long a fresh cluster takes before its first call, phase by phase, in ms: importing
 * @tensorlane/core, `start()` (the driver's runtime and transports), spawning `actors` LoopWorker
 * actors in one `spawn`, a group of them when the transport needs one, and the first 4 KiB call
 * between the first two. One JSON line; run it several times, alternating the builds compared, and
 * on both Nodes (Node's compile cache exists from 22.8).
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
const imported = performance.now()
const cluster = await start({ transports: transport === "gloo" ? ["@tensorlane/transport-gloo"] : [] })
try {
  const started = performance.now()
  const spawned = await cluster.spawn(LoopWorker, { count })
  const ready = performance.now()
  if (count > 1 && cluster.runtime.transport(transport).capabilities.needsGroup) await cluster.createCollectiveGroup(spawned, { backend: transport })
  const grouped = performance.now()
  const [a, b] = spawned
  if (count > 1 && (await cluster.get(b.numel(a.make.options({ tensorTransport: transport })(4096)))) !== 1024) throw new Error("wrong count")
  const called = performance.now()
  const ms = (from, to) => Number((to - from).toFixed(1))
  console.log(JSON.stringify({ node: process.version, actors: count, transport, importMs: ms(t0, imported), startMs: ms(imported, started), spawnMs: ms(started, ready), groupMs: ms(ready, grouped), firstCallMs: ms(grouped, called) }))
} finally {
  await cluster.shutdown()
}
