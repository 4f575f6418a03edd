/**
 * The cost of one call end to end: `cluster.get(b.numel(a.make(bytes)))` in a loop over one
 * transport, its refs released by hand ("released") or left to the garbage collector as users write
 * it ("natural"). Prints one JSON line: wall time per call and its median, the calls over twice the
 * median; per process (driver, producer, consumer): CPU time per call (all its threads), page faults
 * per call (minor: fresh pages), full collections and their pauses on its main thread (the final,
 * atomic part of an incremental one: total per call and the longest); and the objects the producer
 * still holds at the end and at most during the loop. The first tenth of the calls warms up and is
 * not counted. With "driver" last, the program reads each result itself, `cluster.get(a.make(bytes))`,
 * and the consumer idles.
 *   npm run build, then node tools/bench/calls/loop.mjs [transport] [calls] [bytes] [released|natural] [actor|driver]
 * (default object-store, 4000 calls, 4096 bytes, released, actor; also gloo, nixl, shm, and tcp and
 * tcp-effect, the two forms of examples/transport-tcp: written with Promises and in Effect).
 */
import { loopCall, startLoop } from "./loopCluster.mjs"
import { processUsage } from "./usage.mjs"

const [transport = "object-store", calls = "4000", size = "4096", loop = "released", to = "actor"] = process.argv.slice(2)
const count = Number(calls)
const bytes = Number(size)

const { cluster, a, b } = await startLoop(transport, loop)
try {
  const usages = async () => ({ driver: processUsage(), producer: await cluster.get(a.usage()), consumer: await cluster.get(b.usage()) })
  const call = loopCall({ cluster, a, b }, transport, bytes, loop, to)
  const held = async () => (await cluster.inspect()).processes[a.actorId].primary.length
  for (let i = 0; i < Math.ceil(count / 10); i++) await call()
  const before = await usages()
  const samples = []
  let mostHeld = 0
  const started = performance.now()
  for (let i = 0; i < count; i++) {
    const t0 = performance.now()
    await call()
    samples.push(performance.now() - t0)
    // The producer's objects, looked at 20 times over the loop (outside the timed calls).
    if (i % Math.ceil(count / 20) === 0) mostHeld = Math.max(mostHeld, await held())
  }
  const wallMs = performance.now() - started
  const after = await usages()
  const median = [...samples].sort((x, y) => x - y)[Math.floor(samples.length / 2)]
  const perCall = (n, digits = 1) => Number((n / count).toFixed(digits))
  const costs = (name) => {
    const [x, y] = [before[name], after[name]]
    return {
      cpuUsPerCall: perCall(y.cpuUs - x.cpuUs),
      minfltPerCall: perCall(y.minflt - x.minflt),
      majflt: y.majflt - x.majflt,
      collections: y.collections - x.collections,
      pauseUsPerCall: perCall((y.pauseMs - x.pauseMs) * 1000),
      longestPauseUs: Number((y.longestMs * 1000).toFixed(1)),
    }
  }
  console.log(
    JSON.stringify({
      transport,
      loop,
      to,
      calls: count,
      bytes,
      wallUsPerCall: perCall(wallMs * 1000),
      medianUs: Number((median * 1000).toFixed(1)),
      maxUs: Number((Math.max(...samples) * 1000).toFixed(1)),
      overTwiceMedian: samples.filter((ms) => ms > 2 * median).length,
      driver: costs("driver"),
      producer: costs("producer"),
      consumer: costs("consumer"),
      producerObjectsMost: mostHeld,
      producerObjectsAtEnd: await held(),
    }),
  )
} finally {
  await cluster.shutdown()
}
