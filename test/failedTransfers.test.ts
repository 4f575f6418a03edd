/**
 * The memory of failed transfers goes back once the transport can no longer write it: six failed
 * 128 MiB receives, over gloo and over nixl, whose producer stops answering (the receives time out)
 * or dies mid-transfer, leave the consumer within 128 MiB of its virtual and resident memory before,
 * and with no more descriptors, once the group is destroyed or the producer is dead. A buffer that
 * gloo may still write is never handed out again meanwhile, and is once gloo let go of it; one that
 * the object store will never write is at once.
 */
import { type ActorHandle, type Cluster, type ObjectRef, type Tensor, start } from "@tensorlane/core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { LeakWorker, type Memory } from "./fixtures/leakActors.mjs"
import { eventually, expectClean, rejection, tagOf, take as takeFrom } from "./helpers.ts"

const GLOO = "@tensorlane/transport-gloo"
const NIXL = "@tensorlane/transport-nixl"
const MiB = 1 << 20
const SIZE = 128 * MiB
const FAILURES = 6
// The consumer recycles no host memory: what it reports is what it holds, not what its cache keeps
// warm for the next allocation (up to its capacity, by design). One malloc arena: glibc reserves 64 MiB
// of address space for each thread that runs at once beyond the first and keeps it after the thread
// ends, so two transfer threads more than in the warm-up would read as 144 MiB held.
const NO_CACHE = { TENSORLANE_HOST_CACHE_BYTES: "0", MALLOC_ARENA_MAX: "1" }

let cluster: Cluster
const take = <T>(ref: ObjectRef<T>) => takeFrom(cluster)(ref)

beforeAll(async () => {
  cluster = await start({ transports: [GLOO, NIXL], transferTimeoutMs: 5_000 })
}, 60_000)
afterAll(() => cluster?.shutdown())
afterEach(async () => {
  await expectClean(cluster)
})

type Worker = ActorHandle<typeof LeakWorker>

const growth = (before: Memory, after: Memory) => ({
  vmSize: after.vmSize - before.vmSize,
  rss: after.rss - before.rss,
  fds: after.fds - before.fds,
})
const fellBack = (g: ReturnType<typeof growth>) => g.vmSize < SIZE && g.rss < SIZE && g.fds <= 0

/** The consumer, within a few seconds, within 128 MiB of its memory `before` and with no more descriptors. */
const expectFellBack = async (consumer: Worker, before: Memory) => {
  const after = await eventually(() => take(consumer.memory()), (m) => fellBack(growth(before, m)), 10_000)
  const grown = growth(before, after)
  expect(grown.vmSize).toBeLessThan(SIZE)
  expect(grown.rss).toBeLessThan(SIZE)
  expect(grown.fds).toBeLessThanOrEqual(0)
}

type Make = (p: Worker) => ObjectRef<Tensor>
const sixOf = (producer: Worker, make: Make) => Array.from({ length: FAILURES }, () => make(producer))

/**
 * The consumer's memory once six receives like those that will fail succeeded: threads (and their
 * address space) that run six transfers at once are there before, as they are after.
 */
const memoryWhenWarm = async (producer: Worker, consumer: Worker, make: Make) => {
  const refs = sixOf(producer, make)
  expect(await take(consumer.bytes(...refs))).toBe(FAILURES * SIZE)
  for (const ref of refs) ref.release()
  return take(consumer.memory())
}

/** Until the consumer lists its receives from the stopped producer (it cannot answer: ask briefly). */
const receivesPosted = (consumer: Worker) =>
  eventually(
    () => cluster.inspect({ timeoutMs: 200 }),
    (i) => (i.processes[consumer.actorId]?.pendingTransfers.length ?? 0) >= FAILURES,
  )


interface Setting {
  readonly consumer: Worker
  readonly producer: Worker
  /** Makes the objects of the transfers that succeed before. */
  readonly warmer: Worker
  readonly make: Make
  readonly destroyGroup: () => Promise<void>
}

const settings = {
  gloo: async (): Promise<Setting> => {
    const [consumer, producer] = await cluster.spawn(LeakWorker, { count: 2, env: NO_CACHE })
    const group = await cluster.createCollectiveGroup([producer, consumer], { backend: "gloo" })
    return { consumer, producer, warmer: producer, make: (p) => p.makeGloo(SIZE), destroyGroup: () => group.destroy() }
  },
  // Another producer before: a consumer connected to the stopped one would read its memory all the same.
  nixl: async (): Promise<Setting> => {
    const [consumer, warmer, producer] = await cluster.spawn(LeakWorker, { count: 3, env: NO_CACHE })
    return { consumer, producer, warmer, make: (p) => p.makeNixl(SIZE), destroyGroup: async () => undefined }
  },
}

/** Once the producer is stopped with the six receives asked for: how they fail, and with what. */
const failures = {
  "time out": { tags: ["TimeoutError"], cause: async () => undefined },
  "lose their producer": {
    tags: ["TransferError", "ActorDiedError"],
    cause: async (consumer: Worker, pid: number) => {
      await receivesPosted(consumer)
      process.kill(pid, "SIGKILL")
    },
  },
}

/** After they failed: what the consumer waits for to fall back. */
const ends = {
  "the group is destroyed": async (pid: number, setting: Setting) => {
    process.kill(pid, "SIGCONT")
    await setting.destroyGroup()
  },
  "the producer is killed": async (pid: number) => {
    process.kill(pid, "SIGKILL")
  },
  "it is dead": async () => undefined,
}

it.each([
  ["gloo", "time out", "the group is destroyed"],
  ["gloo", "lose their producer", "it is dead"],
  ["nixl", "time out", "the producer is killed"],
  ["nixl", "lose their producer", "it is dead"],
] as const)("%s: six receives that %s leave the consumer as it was, once %s", async (transport, failure, end) => {
  const setting = await settings[transport]()
  const { consumer, producer } = setting
  const before = await memoryWhenWarm(setting.warmer, consumer, setting.make)
  const refs = sixOf(producer, setting.make)
  const pid = await take(producer.pid())
  process.kill(pid, "SIGSTOP")
  const call = rejection(take(consumer.bytes(...refs)))
  await failures[failure].cause(consumer, pid)
  expect(failures[failure].tags).toContain(tagOf(await call))
  for (const ref of refs) ref.release()
  await ends[end](pid, setting)
  await expectFellBack(consumer, before)
  await setting.destroyGroup()
})

describe("gloo", () => {
  it("a collective that gives up before its root comes leaves none of its tensors with gloo: their memory is handed out again at once", async () => {
    const n = 4 * MiB
    const [root, member] = await cluster.spawn(LeakWorker, { count: 2 })
    const group = await cluster.createCollectiveGroup([root, member], { backend: "gloo" })
    // The ranks compare what they pass before any tensor is posted: the member gives up waiting for the root's part of that.
    expect(await take(member.abandonedBroadcast(group.name, n))).toBe("TimeoutError")
    expect(await take(member.reusesPatternMemory(n, 50))).toBe(true)
    await group.destroy()
  })
})

describe("object-store", () => {
  it("a fetch given up on before its reply came lets its buffer be handed out again at once", async () => {
    const n = 4 * MiB
    const [consumer, producer] = await cluster.spawn(LeakWorker, { count: 2 })
    const ref = producer.makeStored(n)
    const box = await cluster.put([ref])
    const pid = await take(producer.pid())
    process.kill(pid, "SIGSTOP")
    try {
      expect(await take(consumer.abandonedGet(box, n, 300))).toBe("TimeoutError")
      // The stopped producer never answered: nothing will be read into the buffer.
      expect(await take(consumer.reusesPatternMemory(n, 50))).toBe(true)
    } finally {
      process.kill(pid, "SIGCONT")
    }
    box.release()
    ref.release()
  })
})
