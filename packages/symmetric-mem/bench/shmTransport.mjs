/**
 * DESIGN.md §5's scenario over the shm transport: submit to result of consumer.numel(producer.make(n)),
 * median of 7 after 2 warm-ups, per size, next to a single-thread memcpy of the same size (warm buffers)
 * measured in the same run. Rows: "shm" (the scenario as written: the producer's fresh tensor is
 * staged on its heap, the consumer copies it out: two copies), "shm-heap" (the producer writes the
 * bytes into a tensor of its symmetric heap: one copy, the consumer's), and "object-store" (core's
 * socket path) for comparison.
 * Run: npm run build, then node --expose-gc packages/symmetric-mem/bench/shmTransport.mjs [bytes...]
 */
import { fileURLToPath } from "node:url"
import { start } from "@tensorlane/core"
import { ShmBench } from "./benchActors.mjs"

const sizes = process.argv.slice(2).map(Number)
const REPEATS = Number(process.env.REPEATS ?? 7)
const WARMUPS = 2
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const memcpyMs = (n) => {
  const src = Buffer.alloc(n, 1)
  const dst = Buffer.alloc(n)
  const times = []
  for (let i = 0; i < WARMUPS + REPEATS; i++) {
    const t = performance.now()
    src.copy(dst)
    if (i >= WARMUPS) times.push(performance.now() - t)
  }
  return median(times)
}

const cluster = await start({ transports: [fileURLToPath(new URL("../dist/index.js", import.meta.url))] })
try {
  const [producer, consumer] = await cluster.spawn(ShmBench, { count: 2 })
  // A group of the producer alone: its heap, which needs no collective call with the consumer.
  const group = await cluster.createCollectiveGroup([producer], { backend: "shm", name: "bench-heap" })
  const paths = {
    shm: (n) => producer.make(n),
    "shm-heap": (n) => producer.makeOnHeap(n, group.name),
    "object-store": (n) => producer.make.options({ tensorTransport: "object-store" })(n),
  }
  for (const n of sizes.length > 0 ? sizes : [4096, 4 << 20, 64 << 20, 256 << 20]) {
    const copy = memcpyMs(n)
    for (const [path, make] of Object.entries(paths)) {
      const times = []
      for (let i = 0; i < WARMUPS + REPEATS; i++) {
        const started = performance.now()
        const made = make(n)
        const result = consumer.numel(made)
        const numel = await cluster.get(result)
        const ms = performance.now() - started
        made.release()
        result.release()
        if (numel !== n / 4) throw new Error(`numel ${numel}, expected ${n / 4}`)
        if (i >= WARMUPS) times.push(ms)
      }
      const ms = median(times)
      console.log(
        JSON.stringify({
          path,
          bytes: n,
          medianMs: Number(ms.toFixed(3)),
          gbps: Number((n / ms / 1e6).toFixed(3)),
          memcpyMs: Number(copy.toFixed(3)),
          ofMemcpy: Number((copy / ms).toFixed(3)),
        }),
      )
    }
  }
  await group.destroy()
} finally {
  await cluster.shutdown()
}
