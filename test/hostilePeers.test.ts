/**
 * An actor process that writes messages of its own making to the driver (fixtures/hostileActors.ts):
 * what it describes is checked before the driver keeps or passes it on, and the driver goes on.
 */
import { type ActorHandle, type Cluster, type ObjectRef, MAX_MESSAGE_BYTES, start } from "@tensorlane/core"
import { afterAll, beforeAll, expect, it } from "vitest"
import { Hostile } from "./fixtures/hostileActors.ts"
import { expectClean, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let hostile: ActorHandle<typeof Hostile>
let victim: ActorHandle<typeof Hostile>
let oversized: ActorHandle<typeof Hostile>

beforeAll(async () => {
  cluster = await start()
  ;[hostile, victim, oversized] = await cluster.spawn(Hostile, { count: 3 })
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
  tensors: [],
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
