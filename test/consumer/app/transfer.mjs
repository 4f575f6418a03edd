// The consumer app's quick start: `node transfer.mjs <object-store|gloo|nixl>` moves a tensor from one actor
// to the other over that transport, and checks what arrived against the same tensor made here and the bytes
// the transport moved. Exits non-zero when anything differs.
import { start, Tensor } from "@tensorlane/core"
import { Effect, Metric } from "effect"
import { SEED, SHAPE, Worker } from "./actors.mjs"

const PACKAGES = { "object-store": [], gloo: ["@tensorlane/transport-gloo"], nixl: ["@tensorlane/transport-nixl"] }
const transport = process.argv[2]
if (!(transport in PACKAGES)) throw new Error(`usage: node transfer.mjs <${Object.keys(PACKAGES).join("|")}>`)

const bytesMoved = async () =>
  (await Effect.runPromise(Metric.snapshot))
    .filter((s) => s.id === "tensorlane_transfer_bytes" && s.attributes?.transport === transport)
    .reduce((n, s) => n + Number(s.state.count), 0)

const cluster = await start({ transports: PACKAGES[transport] })
try {
  const [sender, receiver] = await cluster.spawn(Worker, { count: 2 })
  const group = transport === "gloo" ? await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" }) : undefined
  const ref = sender.randomTensor.options({ tensorTransport: transport })()
  const sum = await cluster.get(receiver.sum(ref))
  const expected = Tensor.randn(SHAPE, { seed: SEED })
  const moved = await bytesMoved()
  if (sum !== expected.sum()) throw new Error(`the receiver's sum ${sum} is not the sender's ${expected.sum()}`)
  if (moved !== expected.nbytes) throw new Error(`${transport} moved ${moved} bytes, not the tensor's ${expected.nbytes}`)
  ref.release()
  await group?.destroy()
  console.log(`${transport}: ${moved} bytes moved between two actors, sum ${sum.toFixed(3)} as sent`)
} finally {
  await cluster.shutdown()
}
