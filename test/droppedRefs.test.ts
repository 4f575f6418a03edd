/**
 * The loop users write, `await cluster.get(consumer.numel(producer.make(n)))`, leaves its refs to the
 * garbage collector. A driver that makes little garbage of its own would not collect for minutes
 * while the producer kept every object; the driver collects once the objects made since its last
 * collection hold more than half the host cache at their producers, so the producer keeps at most
 * that beyond what the program really holds.
 */
import { type ActorHandle, type Cluster, type ObjectRef, type Tensor, start } from "@tensorlane/core"
import { afterAll, beforeAll, expect, it, vi } from "vitest"
import { Worker } from "./fixtures/actors.ts"

const MiB = 1 << 20
/** Half the allowance for this host cache (all of it): 16 MiB of objects made since the last collection, and the next call collects. */
const HOST_CACHE_BYTES = 32 * MiB
const ALLOWANCE_OBJECTS = 16

let cluster: Cluster
let a: ActorHandle<typeof Worker>
let b: ActorHandle<typeof Worker>

beforeAll(async () => {
  vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", String(HOST_CACHE_BYTES))
  cluster = await start()
  ;[a, b] = await cluster.spawn(Worker, { count: 2 })
}, 60_000)

afterAll(async () => {
  await cluster?.shutdown()
  vi.unstubAllEnvs()
})

const producerObjects = async (): Promise<number> => (await cluster.inspect()).processes[a.actorId].primary.length

it("a loop that drops its refs keeps the producer's objects within the allowance beyond what the program holds", async () => {
  const kept: Array<ObjectRef<Tensor>> = []
  let most = 0
  for (let i = 0; i < 200; i++) {
    if (i % 10 === 0) {
      // What the program really holds: one object in ten, kept to the end.
      kept.push(a.make(MiB))
      most = Math.max(most, await producerObjects())
    }
    expect(await cluster.get(b.numel(a.make(MiB)))).toBe(MiB / 4)
  }
  // Beyond half the allowance: the object that crossed it, the call after which the collection runs,
  // and the calls that run before the collection's finalizers do (a task of their own, after it).
  expect(most).toBeLessThanOrEqual(kept.length + ALLOWANCE_OBJECTS + 4)
  expect(most).toBeGreaterThan(kept.length)
  // What the program holds stays: every kept object is still there to read.
  for (const ref of kept) expect(await cluster.get(b.numel(ref))).toBe(MiB / 4)
  for (const ref of kept) ref.release()
})
