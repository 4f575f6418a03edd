/**
 * The nixl transport through the real runtime: seed 000 (register_nixl_memory: a weight matrix
 * registered once, 1000 row views put in one call), seed 001's NIXL walkthrough (actor to actor,
 * put/get inside actors, get from the driver), target buffers, a registered pool, reference
 * counts, how often idle actors wake, and failures (a dead producer, a frozen one and the timeout).
 * One cluster per file; every test ends with empty stores and no registration left
 * (`cluster.inspect()`).
 */
import { type ActorHandle, type Cluster, type GetOptions, type ObjectRef, Tensor, start } from "@tensorlane/core"
import { readdirSync, readFileSync } from "node:fs"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { NixlWorker } from "./fixtures/nixlActors.mjs"
import { eventually, expectClean, rejection, sleep, tagOf, take as takeFrom } from "./helpers.ts"

const NIXL = "@tensorlane/transport-nixl"

let cluster: Cluster
let sender: ActorHandle<typeof NixlWorker>
let receiver: ActorHandle<typeof NixlWorker>
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)
// eslint-disable-next-line @typescript-eslint/no-explicit-any

beforeAll(async () => {
  cluster = await start({ transports: [NIXL] })
  ;[sender, receiver] = await cluster.spawn(NixlWorker, { count: 2 })
}, 60_000)

afterAll(() => cluster?.shutdown())
afterEach(async () => {
  await expectClean(cluster)
})

describe("seed 001: NIXL between actors, no group", () => {
  it("a random tensor moves sender -> receiver without any collective group", async () => {
    const tensor = sender.randomTensor()
    const [mine, theirs] = await Promise.all([take(sender.sum(tensor)), take(receiver.sum(tensor))])
    expect(theirs).toBe(mine)
    tensor.release()
  })

  it("a dict with a strided view moves whole", async () => {
    const dict = sender.tensorDict()
    expect(await take(receiver.sumDict(dict))).toBe(49_995_000)
    // The [4, 3] transpose of a [3, 4] arange, read run by run from the producer's strided view.
    expect(await take(receiver.strided(dict))).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    dict.release()
  })

  it("produce / consume_with_nixl: put inside one actor, get inside another", async () => {
    // 80 KB each: over the 64 KiB that travel inline.
    const t1 = Tensor.randn([100, 200], { seed: 1 })
    const t2 = Tensor.randn([100, 200], { seed: 2 })
    const refs = sender.produce([t1, t2])
    expect(await take(receiver.consumeWithNixl(refs))).toBeCloseTo(t1.sum() + t2.sum(), 3)
    refs.release()
  })

  it("get in the driver reads through NIXL (one-sided), and put from the driver works", async () => {
    const ref = sender.randomTensor()
    const value = (await cluster.get(ref)) as Tensor
    expect(value.shape).toEqual([1000, 1000])
    expect(value.sum()).toBe(await take(sender.sum(ref)))
    ref.release()
    const mine = Tensor.arange(32768, { dtype: "float32" })
    const put = await cluster.put(mine, { tensorTransport: "nixl" })
    expect(await take(receiver.sum(put))).toBe(mine.sum())
    put.release()
  })

  it("the READ completes while the producer's JS thread is busy", async () => {
    const ref = sender.make(16 << 20)
    await take(sender.numel(ref))
    const busy = sender.busy(4000)
    await sleep(200)
    const started = Date.now()
    expect(await take(receiver.numel(ref))).toBe(4 << 20)
    expect(Date.now() - started).toBeLessThan(2500)
    await cluster.get(busy)
    busy.release()
    ref.release()
  })
})

describe("idle actors", () => {
  /** Each thread's count of voluntary context switches (one per wake-up from a wait), by pid/tid. */
  const wakeUps = (pids: ReadonlyArray<number>): Map<string, number> =>
    new Map(
      pids.flatMap((pid) =>
        readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
          try {
            const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8")
            return [[`${pid}/${tid}`, Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)![1])] as const]
          } catch {
            // The thread ended between the listing and the read.
            return []
          }
        }),
      ),
    )

  it("no thread of an actor that served and made a READ wakes more than a few times a second once idle", async () => {
    // Idle wake-ups slow transfers elsewhere on the machine (transport-nixl README: PROGRESS_DELAY_US).
    const ref = sender.make(1 << 20)
    expect(await take(receiver.numel(ref))).toBe(1 << 18)
    ref.release()
    const pids = [await take(sender.pid()), await take(receiver.pid())]
    await sleep(300)
    const before = wakeUps(pids)
    await sleep(1000)
    const busiest = Math.max(...[...wakeUps(pids)].map(([thread, count]) => count - (before.get(thread) ?? count)))
    expect(busiest).toBeLessThan(30)
  })

  it("a fresh one has its NIXL agent before its first transfer, and its threads sleep while it waits", async () => {
    // The transport's prepare starts it as the actor starts: the first call does not wait for it.
    const fresh = await start({ transports: [NIXL] })
    try {
      const [actor] = await fresh.spawn(NixlWorker)
      const deadline = Date.now() + 10_000
      let agent = await fresh.get(actor.nixlAgent())
      while (agent === null && Date.now() < deadline) {
        await sleep(50)
        agent = await fresh.get(actor.nixlAgent())
      }
      expect(agent).toMatch(/^tensorlane-/)
      expect((await fresh.inspect()).processes[actor.actorId].registrations).toEqual([])
      const pids = [await fresh.get(actor.pid())]
      const before = wakeUps(pids)
      await sleep(1000)
      expect(Math.max(...[...wakeUps(pids)].map(([thread, count]) => count - (before.get(thread) ?? count)))).toBeLessThan(30)
    } finally {
      await fresh.shutdown()
    }
  })
})

describe("seed 000: register_nixl_memory", () => {
  // 256 rows: a weight below 1 MiB, whose rows would travel packed (copied into a block) were it not registered.
  it.each([1000, 256])("a weight registered once; %i row views put in one call add one reference, not a registration each", async (rows) => {
    const weightSum = await take(sender.registerWeight(rows))
    expect(await take(sender.weightRefs())).toBe(1)
    const before = (await cluster.inspect()).processes[sender.actorId].registrations
    expect(before).toHaveLength(1)

    const rowsRef = await take(sender.getWeightRefByRows())
    // The put object holds the weight's storage once, whatever the number of views.
    expect(await take(sender.weightRefs())).toBe(2)
    expect((await cluster.inspect()).processes[sender.actorId].registrations).toHaveLength(1)
    expect(await take(receiver.rowCount(rowsRef))).toBe(rows)
    expect(await take(receiver.sumRows(rowsRef))).toBeCloseTo(weightSum, 2)

    // Mixing: the whole matrix as well, still the same registration.
    const wholeRef = await take(sender.getWeightRef())
    expect(await take(sender.weightRefs())).toBe(3)
    expect(await take(receiver.sum(wholeRef))).toBeCloseTo(weightSum, 2)

    rowsRef.release()
    wholeRef.release()
    const refs = await eventuallyRefs(1)
    expect(refs).toBe(1)
    // The pin outlives the objects; deregistering it removes the registration.
    expect(await take(sender.deregisterWeight())).toBe(0)
  })
})

const eventuallyRefs = async (want: number): Promise<number> => {
  let refs = -1
  for (let i = 0; i < 100; i++) {
    refs = await take(sender.weightRefs())
    if (refs === want) break
    await sleep(25)
  }
  return refs
}

describe("strided views", () => {
  it("an object read in more runs than one READ posts is refused where the method returns it, not by every consumer", async () => {
    const fits = sender.column(1 << 20)
    expect(await take(receiver.numel(fits))).toBe(1 << 20)
    fits.release()
    const past = sender.column((1 << 20) + 1)
    const error = await rejection(take(receiver.numel(past)))
    expect(error).toMatchObject({ _tag: "UnsupportedOperationError", message: expect.stringMatching(/cannot travel over nixl: its tensors are read in 1048577 separate runs, .*tensor\.contiguous\(\)/) })
    past.release()
  })
})

describe("target buffers", () => {
  it("get(ref, { target }) receives into existing tensors; strided targets are refused", async () => {
    const ref = sender.make(1 << 20)
    const target = Tensor.zeros([1 << 18], { dtype: "float32" })
    const value = (await cluster.get(ref, { target: [target] })) as Tensor
    expect(value).toBe(target)
    expect(target.sum()).toBe(1 << 18)

    const strided = Tensor.zeros([1 << 19], { dtype: "float32" }).slice(0, 0, 1 << 19, 2)
    const error = await rejection(cluster.get(ref, { target: [strided] }))
    expect(tagOf(error)).toBe("ShapeError")
    expect((error as Error).message).toMatch(/strided|contiguous/)

    const wrong = await rejection(cluster.get(ref, { target: [Tensor.zeros([10], { dtype: "float32" })] }))
    expect(tagOf(wrong)).toBe("ShapeError")
    ref.release()
  })
})

describe("a registered memory pool", () => {
  it("registers once, hands out blocks, takes them back, and names its size when exhausted", async () => {
    expect(await take(sender.poolCreate(1 << 20))).toBe(1)
    const regs = (await cluster.inspect()).processes[sender.actorId].registrations
    expect(regs).toHaveLength(1)

    // Tensors of the pool travel without another registration.
    const a = sender.poolMake(256 << 10, 2)
    expect(await take(receiver.sum(a))).toBe(2 * 65536)
    expect((await take(sender.poolStats())).refs).toBe(2)
    expect((await cluster.inspect()).processes[sender.actorId].registrations).toHaveLength(1)
    a.release()

    // Exhaustion: a typed error naming the pool's size; freed blocks are handed out again. (The
    // block of `a` returns to the pool when its storage is collected, so sizes leave room for it.)
    expect(await take(sender.poolKeep(640 << 10))).toBeGreaterThanOrEqual(640 << 10)
    const full = await take(sender.poolTry(512 << 10))
    expect(full).toMatch(/^OutOfMemoryError: /)
    expect(full).toContain("1048576 bytes")
    expect(await take(sender.poolDrop())).toBeLessThanOrEqual((256 << 10) + 4096)
    expect(await take(sender.poolTry(512 << 10))).toBe("ok")

    // The receiver's own pool as a target: the destination needs no registration either.
    await take(receiver.poolCreate(1 << 20))
    const b = sender.produce([Tensor.full([32 << 10], 1, { dtype: "float32" })])
    expect(await take(receiver.poolReceive(b, 128 << 10))).toBe(32 << 10)
    b.release()

    await take(sender.poolClose())
    await take(receiver.poolClose())
  })
})

describe("failures", () => {
  it("a frozen producer: the get times out (AbortSignal), and after it wakes a new transfer works", async () => {
    // A producer this process never connected to: the READ needs its answer to wire up, and a
    // stopped process gives none. (Once connected, cma reads even a stopped process's memory.)
    const [frozen] = await cluster.spawn(NixlWorker, { count: 1 })
    const ref = frozen.make(4 << 20)
    await take(frozen.numel(ref))
    const pid = await take(frozen.pid())
    process.kill(pid, "SIGSTOP")
    try {
      const error = await rejection(cluster.get(ref, { timeoutMs: 1500 }))
      expect(tagOf(error)).toBe("TimeoutError")
      // The stopped actor cannot answer an inspection: ask only briefly, the driver answers at once
      // (another actor slow to answer on a loaded machine is listed too: ask until only it is).
      const inspection = await eventually(
        () => cluster.inspect({ timeoutMs: 200 }),
        (i) => i.unresponsive.length === 1,
      )
      expect(inspection.unresponsive).toEqual([frozen.actorId])
      expect(inspection.processes.driver.pendingTransfers).toEqual([])
    } finally {
      process.kill(pid, "SIGCONT")
    }
    expect(((await cluster.get(ref, { timeoutMs: 20_000 })) as Tensor).numel).toBe(1 << 20)
    ref.release()
  })

  it.each([
    { when: "before it ever connected", warm: false },
    { when: "after a connection exists", warm: true },
  ])("a producer killed $when: TransferError, and the receiver keeps working with a new producer", async ({ warm }) => {
    const [victim] = await cluster.spawn(NixlWorker, { count: 1 })
    if (warm) {
      const small = victim.make(256 << 10)
      expect(await take(receiver.numel(small))).toBe(64 << 10)
      small.release()
    }
    const ref = victim.make(64 << 20)
    await take(victim.numel(ref))
    const pid = await take(victim.pid())
    process.kill(pid, "SIGKILL")
    await sleep(100)
    // The owner may learn of the death first; the receiver's NIXL READ must fail typed either way.
    const error = await rejection(take(receiver.numel(ref)))
    expect(["TransferError", "ActorDiedError"]).toContain(tagOf(error))
    ref.release()
    const fresh = sender.make(1 << 20)
    expect(await take(receiver.numel(fresh))).toBe(1 << 18)
    fresh.release()
  })

})
