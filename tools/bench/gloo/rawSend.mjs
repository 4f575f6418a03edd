/**
 * Raw Gloo alone, the limit `tensorlane bench` compares its gloo rows with: a one-way send of each
 * size between this process and a child through transport-gloo's addon, median of REPEATS after 2
 * warm-ups, printed as JSON. For experiments on the addon (send buffers, thread placement) without
 * the actor runtime around it.
 *   npm run build, then node tools/bench/gloo/rawSend.mjs [bytes...]  (REPEATS=7)
 */
import { median, openRawGloo } from "@tensorlane/cli"

const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0)
const repeats = Number(process.env.REPEATS ?? 7)
const raw = await openRawGloo(2)
try {
  const results = []
  for (const bytes of sizes.length > 0 ? sizes : [4 << 10, 64 << 20, 256 << 20]) {
    const samplesMs = await raw.measure(bytes, repeats)
    const medianMs = median(samplesMs)
    results.push({ bytes, medianMs, gbPerS: bytes / medianMs / 1e6, samplesMs })
  }
  console.log(JSON.stringify({ path: "gloo raw addon, one-way send + 1-byte ack, two processes", repeats, results }, null, 2))
} finally {
  await raw.close()
}
