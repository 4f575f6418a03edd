/**
 * DESIGN.md §5's scenario over nixl: the producer returns Tensor.full([n / 4], 1) marked nixl, the
 * consumer returns t.numel; the time is submit to result, median of 7 after 2 warm-ups. A
 * single-thread memcpy of the same size is measured in the same run. UCX settings come from the
 * environment (TENSORLANE_NIXL_ERROR_MODE, UCX_TLS, UCX_MM_ERROR_HANDLING, ...), which the actor
 * processes inherit. Prints one JSON line per size.
 * Run: node --expose-gc packages/transport-nixl/bench/actorToActor.mjs [bytes...]  (after npm run build)
 */
import { fileURLToPath } from "node:url"
import { start } from "@tensorlane/core"
import { NixlBench } from "./benchActors.mjs"

const sizes = process.argv.slice(2).map(Number)
const REPEATS = Number(process.env.REPEATS ?? 7)
const WARMUPS = 2
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const memcpyMs = (n) => {
  const a = Buffer.alloc(n, 1)
  const b = Buffer.alloc(n)
  const times = []
  for (let i = 0; i < REPEATS; i++) {
    const t = performance.now()
    a.copy(b)
    times.push(performance.now() - t)
  }
  return median(times)
}

const cluster = await start({ transports: [fileURLToPath(new URL("../dist/index.js", import.meta.url))] })
try {
  const [producer, consumer] = await cluster.spawn(NixlBench, { count: 2 })
  for (const n of sizes.length > 0 ? sizes : [4096, 64 << 20]) {
    const times = []
    for (let i = 0; i < WARMUPS + REPEATS; i++) {
      const started = performance.now()
      const made = producer.make(n)
      const result = consumer.numel(made)
      const numel = await cluster.get(result)
      const ms = performance.now() - started
      made.release()
      result.release()
      if (numel !== n / 4) throw new Error(`numel ${numel}, expected ${n / 4}`)
      if (i >= WARMUPS) times.push(ms)
    }
    const ms = median(times)
    const copy = memcpyMs(n)
    console.log(
      JSON.stringify({
        bytes: n,
        medianMs: Number(ms.toFixed(3)),
        gbps: Number((n / ms / 1e6).toFixed(3)),
        memcpyMs: Number(copy.toFixed(3)),
        ofMemcpy: Number((copy / ms).toFixed(3)),
        errorMode: process.env.TENSORLANE_NIXL_ERROR_MODE ?? "peer",
        ucxTls: process.env.UCX_TLS ?? "default",
        mmErrorHandling: process.env.UCX_MM_ERROR_HANDLING ?? "default",
      }),
    )
  }
} finally {
  await cluster.shutdown()
}
