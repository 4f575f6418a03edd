/**
 * What running a transport hook costs, per call, by the ways the runtime could run it: the function
 * of a transport written with Promises, called directly; an Effect run to a Promise
 * (`Effect.runPromiseExit`, what the runtime does for a transport written in Effect), for a hook that
 * ends at once and for one that waits; and `Effect.runSync`. Then a tensor factory's cost (a 4 KiB
 * `Tensor.zeros`), which reads the allocator scope on every call. Prints one JSON line per row.
 *   npm run build, then node tools/bench/calls/runners.mjs  (CALLS=200000)
 */
import { Tensor } from "@tensorlane/core"
import * as Effect from "effect/Effect"

const calls = Number(process.env.CALLS ?? 200_000)
const signal = new AbortController().signal

const time = async (row, call) => {
  for (let i = 0; i < calls / 10; i++) await call()
  const cpu = process.cpuUsage()
  const started = performance.now()
  for (let i = 0; i < calls; i++) await call()
  const { user, system } = process.cpuUsage(cpu)
  const perCall = (us) => Number((us / calls).toFixed(3))
  console.log(JSON.stringify({ row, calls, wallUsPerCall: perCall((performance.now() - started) * 1000), cpuUsPerCall: perCall(user + system) }))
}

const promiseHook = async () => undefined
const waitingPromiseHook = async () => {
  await Promise.resolve()
}
await time("direct: a Promise hook", () => promiseHook())
await time("direct: a Promise hook that waits", () => waitingPromiseHook())
await time("runPromiseExit: an Effect hook", () => Effect.runPromiseExit(Effect.void, { signal }))
await time("runPromiseExit: an Effect hook that waits", () => Effect.runPromiseExit(Effect.promise(() => Promise.resolve()), { signal }))
await time("runSync: an Effect", () => Effect.runSync(Effect.void))
await time("Tensor.zeros, 4 KiB", () => void Tensor.zeros([1024]))
