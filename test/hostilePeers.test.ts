/**
 * An actor process that writes messages of its own making to the driver (fixtures/hostileActors.ts):
 * what it describes is checked before the driver keeps or passes it on, and the driver goes on.
 */
import { type ActorHandle, type Cluster, type ObjectRef, MAX_MESSAGE_BYTES, start } from "@tensorlane/core"
import { afterAll, beforeAll, expect, it } from "vitest"
import { writeMetas } from "../packages/core/src/internal/wireMetas.ts"
import { Hostile } from "./fixtures/hostileActors.ts"
import { expectClean, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let hostile: ActorHandle<typeof Hostile>
let victim: ActorHandle<typeof Hostile>
let oversized: ActorHandle<typeof Hostile>
let hollow: ActorHandle<typeof Hostile>
let miscounting: ActorHandle<typeof Hostile>

beforeAll(async () => {
  cluster = await start()
  ;[hostile, victim, oversized, hollow, miscounting] = await cluster.spawn(Hostile, { count: 5 })
}, 60_000)
afterAll(() => cluster?.shutdown())

const take = <T>(ref: ObjectRef<T>): Promise<T> => takeFrom(cluster)(ref)

/** An object description as an actor sends it: no tensors, an empty value. */
const info = (objectId: string, producer: string) => ({
  objectId,
  producer,
  producerAddress: "nowhere",
  transport: "object-store",
  skeleton: new Uint8Array(0),
  tensors: writeMetas([]),
  refs: [],
})

it("an actor cannot put objects under another process's ids, even naming itself their producer", async () => {
  // The ids the victim's own puts will take: `${actorId}.1`, `.2`, ...
  const taken = Array.from({ length: 32 }, (_, i) => `${victim.actorId}.${i + 1}`)
  const claims = taken.flatMap((id, i) => [
    { _tag: "Put", reqId: 1_000_000 + i, info: info(id, hostile.actorId) },
    { _tag: "Put", reqId: 2_000_000 + i, info: info(id, victim.actorId) },
    { _tag: "Put", reqId: 3_000_000 + i, info: info(`driver.${i + 1}`, hostile.actorId) },
  ])
  expect(await take(hostile.send(claims))).toBe(claims.length)
  expect(await take(victim.putMany(32))).toBe(32)
  const mine = await cluster.put("the driver's own")
  expect(await cluster.get(mine)).toBe("the driver's own")
  mine.release()
  await expectClean(cluster)
})

it("an actor that describes an object past what messages carry is dropped, and the driver goes on", async () => {
  const id = `${oversized.actorId}.900000`
  const sent = oversized.sendSized({ _tag: "Put", reqId: 4_000_000, info: info(id, oversized.actorId) }, MAX_MESSAGE_BYTES)
  // Before the size was checked as it arrived, the put was kept, and the answer to a get of it (the
  // description and a few bytes more) failed to send, unhandled: the driver's process ended.
  await expect(cluster.get(sent, { timeoutMs: 30_000 })).rejects.toMatchObject({ _tag: "ActorDiedError", actor: oversized.actorId })
  sent.release()
  expect(Object.keys((await cluster.inspect()).processes)).not.toContain(oversized.actorId)
  expect(await take(victim.putMany(2))).toBe(2)
  expect(await take(hostile.putMany(2))).toBe(2)
  await expectClean(cluster)
})

it("an actor whose call's result holds neither a value nor an error is dropped, and the arguments the call pinned are let go", async () => {
  const argument = await cluster.put("pinned while the call runs")
  // Call ids are the driver's, from 1: these name the call in flight among the others.
  const results = Array.from({ length: 1000 }, (_, i) => ({ _tag: "Result", callId: i + 1, transfers: [] }))
  await expect(take(hollow.send(results, argument))).rejects.toMatchObject({ _tag: "ActorDiedError", actor: hollow.actorId })
  argument.release()
  expect(await take(victim.putMany(2))).toBe(2)
  await expectClean(cluster)
})

it("an actor that counts a tensor's dims as NaN, negative, fractional or past what can be addressed is dropped", async () => {
  const wrong = [[Number.NaN], [-1], [0.5], [2 ** 53], [2 ** 26, 2 ** 26]]
  const actors = await cluster.spawn(Hostile, { count: wrong.length - 1 })
  for (const [i, actor] of [miscounting, ...actors].entries()) {
    const tensors = writeMetas([{ dtype: "float32", shape: wrong[i]!, device: "cpu" }])
    const put = { _tag: "Put", reqId: 5_000_000, info: { ...info(`${actor.actorId}.900001`, actor.actorId), tensors } }
    await expect(take(actor.send([put]))).rejects.toMatchObject({ _tag: "ActorDiedError", actor: actor.actorId })
  }
  expect(await take(victim.putMany(2))).toBe(2)
  await expectClean(cluster)
})
