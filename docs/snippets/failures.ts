// Failures are typed: an application error reaches every dependent call; a timeout or a dead actor
// fails only what depended on it, and the other actors stay usable.
import { ActorDiedError, ApplicationError, TimeoutError, start } from "@tensorlane/core"
import { Worker } from "./actors.ts"

await using cluster = await start({ transports: [], transferTimeoutMs: 30_000 })
const [a, b] = await cluster.spawn(Worker, { count: 2 })

using failed = a.fail("no such shard")
try {
  await cluster.get(b.sum(failed)) // b never runs: its argument failed
} catch (error) {
  if (error instanceof ApplicationError) console.log(`${error._tag} (${error.remoteName} in ${error.actor}.${error.method}): ${error.message}`)
}

try {
  await cluster.get(a.sleep(1_000), { timeoutMs: 100 })
} catch (error) {
  if (error instanceof TimeoutError) console.log(`${error._tag} after ${error.timeoutMs} ms`)
}

process.kill(await cluster.get(b.pid()), "SIGKILL")
try {
  await cluster.get(b.sum(a.make(4)))
} catch (error) {
  if (error instanceof ActorDiedError) console.log(`${error._tag}: ${error.actor}`)
}
console.log(`a still answers: ${await cluster.get(a.sum(a.make(4)))}`)
