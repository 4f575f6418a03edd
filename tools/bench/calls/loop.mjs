/**
 * The cost of one small call end to end: `cluster.get(b.numel(a.make(bytes)))` in a loop, its refs
 * released by hand, over one transport. Prints one JSON line: wall time per call, and the CPU time
 * per call of the driver (its main thread and its transfer agent) and of the two actors together.
 * The first tenth of the calls warms up and is not counted.
 *   npm run build, then node tools/bench/calls/loop.mjs [transport] [calls] [bytes]
 * (default object-store, 4000 calls, 4096 bytes; also nixl, shm, and tcp and tcp-effect, the two
 * forms of examples/transport-tcp: written with Promises and in Effect).
 */
import { start } from "@tensorlane/core"
import { LoopWorker } from "./loopActors.mjs"

const [transport = "object-store", calls = "4000", size = "4096"] = process.argv.slice(2)
const count = Number(calls)
const bytes = Number(size)
/** The one-sided transports it runs over, besides object-store. */
const modules = {
  nixl: "@tensorlane/transport-nixl",
  shm: "@tensorlane/symmetric-mem",
  tcp: "@tensorlane-examples/transport-tcp",
  "tcp-effect": "@tensorlane-examples/transport-tcp/effect",
}

const cpuOfDriver = () => {
  const { user, system } = process.cpuUsage()
  return user + system
}

const cluster = await start({ transports: transport in modules ? [modules[transport]] : [] })
try {
  const [a, b] = await cluster.spawn(LoopWorker, { count: 2 })
  const cpuOfActors = async () => (await cluster.get(a.cpu())) + (await cluster.get(b.cpu()))
  const call = async () => {
    const made = a.make.options({ tensorTransport: transport })(bytes)
    const numel = b.numel(made)
    await cluster.get(numel)
    made.release()
    numel.release()
  }
  for (let i = 0; i < Math.ceil(count / 10); i++) await call()
  const actors = await cpuOfActors()
  const driver = cpuOfDriver()
  const started = performance.now()
  for (let i = 0; i < count; i++) await call()
  const wallMs = performance.now() - started
  const perCall = (us) => Number((us / count).toFixed(1))
  console.log(
    JSON.stringify({
      transport,
      calls: count,
      bytes,
      wallUsPerCall: perCall(wallMs * 1000),
      driverCpuUsPerCall: perCall(cpuOfDriver() - driver),
      actorsCpuUsPerCall: perCall((await cpuOfActors()) - actors),
    }),
  )
} finally {
  await cluster.shutdown()
}
