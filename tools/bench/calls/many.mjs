/**
 * A value of many small tensors against one tensor of the same bytes, in the same run: a dict of
 * `count` float32 tensors of `bytes` each (as a model's state dict), `cluster.get(b.numelAll(a.makeMany(count, bytes)))`,
 * and `cluster.get(b.numel(a.make(count * bytes)))`, refs released, alternating, over one transport.
 * Prints one JSON line: the median of each (after a tenth of the calls untimed) and their ratio.
 *   npm run build, then node tools/bench/calls/many.mjs [transport] [count] [bytes] [calls]
 * (default object-store, 256 tensors of 4096 bytes, 200 calls; also gloo, nixl, shm).
 */
import { startLoop } from "./loopCluster.mjs"

const [transport = "object-store", countArg = "256", bytesArg = "4096", callsArg = "200"] = process.argv.slice(2)
const [count, bytes, calls] = [Number(countArg), Number(bytesArg), Number(callsArg)]

const { cluster, a, b } = await startLoop(transport, "released")
try {
  const many = a.makeMany.options({ tensorTransport: transport })
  const one = a.make.options({ tensorTransport: transport })
  const timed = async (make, read, expected) => {
    const started = performance.now()
    const made = make()
    const ref = read(made)
    if ((await cluster.get(ref)) !== expected) throw new Error("wrong count")
    made.release()
    return performance.now() - started
  }
  const runs = { many: [], one: [] }
  for (let i = 0; i < calls; i++) {
    const [m, o] = [await timed(() => many(count, bytes), (made) => b.numelAll(made), (count * bytes) / 4), await timed(() => one(count * bytes), (made) => b.numel(made), (count * bytes) / 4)]
    if (i < Math.ceil(calls / 10)) continue
    runs.many.push(m)
    runs.one.push(o)
  }
  const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]
  const [manyMs, oneMs] = [median(runs.many), median(runs.one)]
  console.log(JSON.stringify({ transport, count, bytes, calls, manyMedianMs: Number(manyMs.toFixed(2)), oneMedianMs: Number(oneMs.toFixed(2)), ratio: Number((manyMs / oneMs).toFixed(1)), node: process.version }))
} finally {
  await cluster.shutdown()
}
