/**
 * The scenario of `tensorlane bench` over the shm transport, timed by the CLI's loop
 * (`timeScenario`), next to a single-thread memcpy of the same size measured in the same run. Rows:
 * "shm" (the scenario as written: the producer's fresh tensor is staged on its heap, the consumer
 * copies it out: two copies), "shm-heap" (the producer writes the bytes into a tensor of its
 * symmetric heap: one copy, the consumer's), and "object-store" (core's socket path) for comparison.
 * Prints one JSON line per row.
 *   npm run build, then node --expose-gc tools/bench/shm/shmTransport.mjs [bytes...]  (REPEATS=7)
 */
import { median, memcpyMs, timeScenario } from "@tensorlane/cli"
import { start } from "@tensorlane/core"
import { ShmBench } from "./benchActors.mjs"

const sizes = process.argv.slice(2).map(Number)
const repeats = Number(process.env.REPEATS ?? 7)
const warmups = 2

const cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
try {
  const [producer, consumer] = await cluster.spawn(ShmBench, { count: 2 })
  // A group of the producer alone: its heap, which needs no collective call with the consumer.
  const group = await cluster.createCollectiveGroup([producer], { backend: "shm", name: "bench-heap" })
  const paths = {
    shm: (n) => producer.make(n),
    "shm-heap": (n) => producer.makeOnHeap(n, group.name),
    "object-store": (n) => producer.make.options({ tensorTransport: "object-store" })(n),
  }
  for (const bytes of sizes.length > 0 ? sizes : [4096, 4 << 20, 64 << 20, 256 << 20]) {
    const copy = memcpyMs(bytes, repeats, warmups)
    for (const [path, make] of Object.entries(paths)) {
      const ms = median(await timeScenario(cluster, { label: path, make: () => make(bytes), consume: (made) => consumer.numel(made), bytes, repeats, warmups }))
      console.log(
        JSON.stringify({
          path,
          bytes,
          medianMs: Number(ms.toFixed(3)),
          gbps: Number((bytes / ms / 1e6).toFixed(3)),
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
