/**
 * Which calls of a loop the garbage collections land on: the loop of loop.mjs over one transport, each
 * call's time beside the full collections of the driver (D), the producer (P) and the consumer (C)
 * that overlapped it, as pause@start (ms; the start from the call's own start). Prints one line per
 * call, then the median, mean and 95th percentile, each process's collections, and how many calls
 * carried at least one. The first `warm` calls (default 150) are not shown.
 *   npm run build, then node --expose-gc tools/bench/calls/timeline.mjs [transport] [calls] [bytes] [released|natural] [warm]
 * (default object-store, 120 calls, 64 MiB, natural).
 */
import { loopCall, startLoop } from "./loopCluster.mjs"
import { takeCollections } from "./usage.mjs"

const [transport = "object-store", calls = "120", size = String(64 << 20), loop = "natural", warm = "150"] = process.argv.slice(2)
const count = Number(calls)
const bytes = Number(size)

const { cluster, a, b } = await startLoop(transport, loop)
try {
  const call = loopCall({ cluster, a, b }, transport, bytes, loop)
  const epoch = () => performance.timeOrigin + performance.now()
  const collectionsOf = async () => ({ D: takeCollections(), P: await cluster.get(a.collections()), C: await cluster.get(b.collections()) })
  for (let i = 0; i < Number(warm); i++) await call()
  await collectionsOf()
  const spans = []
  for (let i = 0; i < count; i++) {
    const started = epoch()
    await call()
    spans.push([started, epoch()])
  }
  const collections = await collectionsOf()
  const lines = []
  let carrying = 0
  for (const [i, [started, ended]] of spans.entries()) {
    const landed = Object.entries(collections).flatMap(([process, list]) =>
      list.filter(([at, pause]) => at + pause > started && at < ended).map(([at, pause]) => `${process}${pause.toFixed(1)}@${(at - started).toFixed(1)}`),
    )
    if (landed.length > 0) carrying++
    lines.push(`${String(i).padStart(5)} ${(ended - started).toFixed(2).padStart(8)}  ${landed.join(" ")}`)
  }
  const ms = spans.map(([started, ended]) => ended - started).sort((x, y) => x - y)
  const figure = (x) => x.toFixed(2)
  console.log(lines.join("\n"))
  console.log(
    `${transport} ${loop} ${bytes} bytes, ${count} calls: median ${figure(ms[Math.floor(count / 2)])} ms, mean ${figure(ms.reduce((x, y) => x + y, 0) / count)}, ` +
      `95th percentile ${figure(ms[Math.floor(count * 0.95)])}; full collections D ${collections.D.length}, P ${collections.P.length}, C ${collections.C.length}; calls carrying one ${carrying}`,
  )
} finally {
  await cluster.shutdown()
}
