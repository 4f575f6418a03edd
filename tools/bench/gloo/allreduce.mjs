/**
 * A gloo allreduce through transport-gloo's addon alone: two ranks (this process and a child) reduce
 * `bytes` of float32 in place CALLS times; prints the median µs per call after the first tenth. For
 * the collectives' own costs (the ranks' comparison of what they pass, docs/decisions/gloo-collective-agreement.md);
 * TENSORLANE_GLOO_ADDON=<path> runs another build of the addon.
 *   npm run build, then node tools/bench/gloo/allreduce.mjs [bytes]  (CALLS=2000)
 */
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { loadGlooAddon } from "@tensorlane/transport-gloo"

const { Group } = loadGlooAddon().addon
const child = process.argv[3] === "child"
const bytes = Number(process.argv[2] ?? 4096)
const calls = Number(process.env.CALLS ?? 2000)
const rank = child ? 1 : 0
const group = new Group(rank, 2, 10_000)
const peer = child ? process : fork(fileURLToPath(import.meta.url), [String(bytes), "child"], { serialization: "advanced" })
const exchange = (message) => {
  peer.send(message)
  return new Promise((resolve) => peer.once("message", resolve))
}
const mine = group.address()
const theirs = await exchange(mine)
await group.connect(rank === 0 ? [mine, theirs] : [theirs, mine])
const buffer = new Uint8Array(new SharedArrayBuffer(bytes))
const samples = []
for (let i = 0; i < calls; i++) {
  const started = performance.now()
  await group.allreduce([buffer], ["float32"], "sum", 10_000).promise
  samples.push(performance.now() - started)
}
await exchange("done")
group.destroy()
if (!child) {
  const timed = samples.slice(Math.floor(calls / 10)).sort((a, b) => a - b)
  console.log(JSON.stringify({ bytes, calls, medianUs: Number((1000 * timed[Math.floor(timed.length / 2)]).toFixed(1)) }))
}
process.disconnect?.()
