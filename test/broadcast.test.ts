/** cluster.broadcast: one object placed in many receivers ahead of the calls that use it. */
import { type ActorHandle, type Cluster, MissingGroupError, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PairWorker, Worker } from "./fixtures/actors.ts"
import { SOCKETPAIR, bytesMoved, expectClean, take as takeFrom } from "./helpers.ts"

const LARGE = 1 << 20
let cluster: Cluster
let workers: Array<ActorHandle<typeof Worker>>
let pairs: Array<ActorHandle<typeof PairWorker>>
const take = <T>(ref: import("@tensorlane/core").ObjectRef<T>) => takeFrom(cluster)(ref)

beforeAll(async () => {
  cluster = await start({ transports: [SOCKETPAIR] })
  workers = await cluster.spawn(Worker, { count: 3 })
  pairs = await cluster.spawn(PairWorker, { count: 3 })
}, 60_000)

afterAll(() => cluster?.shutdown())

const receivedBy = async (objectId: string) => {
  const { processes } = await cluster.inspect()
  return Object.entries(processes)
    .filter(([, p]) => p.received.includes(objectId))
    .map(([id]) => id)
    .sort()
}

describe.each([
  ["object-store", () => workers, () => workers[0].make(LARGE)],
  ["socketpair", () => pairs, () => pairs[0].make(LARGE, 1)],
] as const)("over %s", (transport, actors, make) => {
  it("keeps a copy in every receiver until the object is freed; calls there move no bytes", async () => {
    const [, ...receivers] = actors()
    const group = transport === "socketpair" ? await cluster.createCollectiveGroup(actors(), { backend: transport }) : undefined
    const ref = make()
    const before = await bytesMoved(transport)
    await cluster.broadcast(ref, receivers)
    expect(await bytesMoved(transport)).toBe(before + 2 * LARGE)
    expect(await receivedBy(ref.id)).toEqual(receivers.map((r) => r.actorId).sort())
    for (const r of receivers) expect(await take(r.sum(ref))).toBe(LARGE / 4)
    expect(await bytesMoved(transport)).toBe(before + 2 * LARGE)
    ref.release()
    await expectClean(cluster)
    await group?.destroy()
  })
})

it("a two-sided broadcast without a group naming every receiver fails with MissingGroupError", async () => {
  const group = await cluster.createCollectiveGroup([pairs[0], pairs[1]], { backend: "socketpair" })
  const ref = pairs[0].make(LARGE, 1)
  await expect(cluster.broadcast(ref, [pairs[1], pairs[2]])).rejects.toBeInstanceOf(MissingGroupError)
  ref.release()
  await group.destroy()
  await expectClean(cluster)
})
