/**
 * What fails, how, and what keeps working: unknown transports, two-sided transports without a group
 * or through get/put, application errors, timeouts, a killed actor, and the Effect face's typed
 * failures.
 */
import {
  ActorDiedError,
  type ActorHandle,
  ApplicationError,
  type Cluster,
  type GetOptions,
  MissingGroupError,
  type ObjectRef,
  Tensor,
  TensorlaneCluster,
  UnknownTransportError,
  UnsupportedOperationError,
  start,
} from "@tensorlane/core"
import { Effect } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { Helper, Misconfigured } from "./fixtures/actors.mjs"
import { PairWorker, Worker } from "./fixtures/actors.ts"
import { SOCKETPAIR, TMPFILE, eventually, expectClean, isGone, rejection, sleep, take as takeFrom, thrown } from "./helpers.ts"

let cluster: Cluster
let w: ActorHandle<typeof Worker>
let h0: ActorHandle<typeof Helper>
let h1: ActorHandle<typeof Helper>
let p0: ActorHandle<typeof PairWorker>
let p1: ActorHandle<typeof PairWorker>
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

const LARGE = 1 << 20
const REGISTERED = ["object-store", "tmpfile", "socketpair"]

beforeAll(async () => {
  cluster = await start({ transports: [TMPFILE, SOCKETPAIR] })
  ;[[w], [h0, h1], [p0, p1]] = await Promise.all([
    cluster.spawn(Worker),
    cluster.spawn(Helper, { count: 2 }),
    cluster.spawn(PairWorker, { count: 2 }),
  ])
}, 60_000)

afterAll(() => cluster?.shutdown())
afterEach(() => expectClean(cluster))

describe("unknown transports", () => {
  it("fail at spawn, listing the registered ones, before any process starts", async () => {
    const error = await rejection(cluster.spawn(Misconfigured))
    expect(error).toBeInstanceOf(UnknownTransportError)
    expect(error).toMatchObject({ _tag: "UnknownTransportError", transport: "nope", registered: REGISTERED })
    expect((error as Error).message).toContain("registered transports: object-store, tmpfile, socketpair")
    expect(Object.keys((await cluster.inspect()).processes).some((id) => id.startsWith("Misconfigured"))).toBe(false)
  })

  it("fail at submission, listing the registered ones", async () => {
    const error = thrown(() => w.make.options({ tensorTransport: "nope" })(8))
    expect(error).toBeInstanceOf(UnknownTransportError)
    expect(error).toMatchObject({ transport: "nope", registered: REGISTERED })
    expect((error as Error).message).toContain("object-store, tmpfile, socketpair")
    await expect(cluster.put(Tensor.ones([2]), { tensorTransport: "nope" })).rejects.toBeInstanceOf(UnknownTransportError)
    await expect(cluster.createCollectiveGroup([p0, p1], { backend: "nope" })).rejects.toMatchObject({
      _tag: "UnknownTransportError",
      registered: REGISTERED,
    })
  })
})

describe("two-sided transports", () => {
  it("a transfer without a group fails at submission with an error naming createCollectiveGroup", async () => {
    const ref = p0.make(LARGE, 2)
    for (const consumer of [p1, w]) {
      const error = thrown(() => consumer.sum(ref))
      expect(error).toBeInstanceOf(MissingGroupError)
      expect(error).toMatchObject({ backend: "socketpair" })
      expect((error as Error).message).toContain("createCollectiveGroup")
    }
    // The producer itself needs no transfer.
    expect(await take(p0.sum(ref))).toBe(2 * (LARGE / 4))
    ref.release()
  })

  it("get without useObjectStore fails saying how to fix it, and works with it", async () => {
    const ref = p0.make(LARGE, 3)
    const error = await rejection(cluster.get(ref))
    expect(error).toBeInstanceOf(UnsupportedOperationError)
    expect((error as Error).message).toContain("{ useObjectStore: true }")
    const copy = await cluster.get(ref, { useObjectStore: true })
    expect(copy.shape).toEqual([LARGE / 4])
    expect(copy.sum()).toBe(3 * (LARGE / 4))
    ref.release()
  })

  it("put fails with UnsupportedOperationError saying why, in the driver and in an actor", async () => {
    const error = await rejection(cluster.put(Tensor.ones([4]), { tensorTransport: "socketpair" }))
    expect(error).toBeInstanceOf(UnsupportedOperationError)
    expect((error as Error).message).toMatch(/two-sided.*socketpair/)
    const inActor = await rejection(take(w.putTwo(8, "socketpair")))
    expect(inActor).toBeInstanceOf(UnsupportedOperationError)
    expect((inActor as Error).message).toContain("two-sided")
  })
})

describe("application errors", () => {
  it("reach every dependent call and get, typed, with the remote stack", async () => {
    const failed = w.boom("kaboom")
    const dependent = h0.sum(failed)
    const nested = w.digest({ inside: [dependent] })
    for (const ref of [failed, dependent, nested]) {
      const error = await rejection(cluster.get(ref))
      expect(error).toBeInstanceOf(ApplicationError)
      expect(error).toMatchObject({ _tag: "ApplicationError", remoteName: "RangeError", actor: "Worker-0", method: "boom" })
      expect((error as ApplicationError).message).toContain("kaboom")
      expect((error as ApplicationError).remoteStack).toMatch(/RangeError: kaboom\n\s+at .*fixtures\/actors\.ts/)
    }
    for (const ref of [failed, dependent, nested]) ref.release()
    // The actors that saw the failure keep working.
    const made = w.make(LARGE)
    expect(await take(h0.sum(made))).toBe(LARGE / 4)
    made.release()
  })

  it("a thrown value that cannot be read fails its call like any other, instead of leaving it unanswered", async () => {
    const ref = w.throwUnreadable()
    const error = await rejection(cluster.get(ref, { timeoutMs: 10_000 }))
    expect(error).toBeInstanceOf(ApplicationError)
    expect(error).toMatchObject({ actor: "Worker-0", method: "throwUnreadable", remoteName: "Error", message: expect.stringContaining("cannot be read") })
    ref.release()
  })
})

describe("timeouts", () => {
  it("get with timeoutMs rejects with TimeoutError; without, it waits as long as it takes", async () => {
    const busy = h0.busy(1_500)
    const started = performance.now()
    const error = await rejection(cluster.get(busy, { timeoutMs: 200 }))
    expect(error).toMatchObject({ _tag: "TimeoutError" })
    expect((error as Error).message).toContain(busy.id)
    expect(performance.now() - started).toBeLessThan(1_200)
    const { start: began, end } = await take(busy)
    expect(end - began).toBeGreaterThanOrEqual(1_500)
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_300)
  })
})

describe("a killed actor", () => {
  it("fails its pending calls and objects with ActorDiedError; other actors stay usable", async () => {
    const pid = await take(h1.pid())
    const small = h1.make(64)
    const large = h1.make(LARGE)
    expect(await take(h1.numel(large))).toBe(LARGE / 4)
    const busy = h1.busy(20_000)
    const made = w.make(LARGE)
    const queued = h1.sum(made)
    await sleep(300)
    process.kill(pid, "SIGKILL")
    for (const ref of [busy, queued, large]) {
      await expect(cluster.get(ref, { timeoutMs: 10_000 })).rejects.toMatchObject({ _tag: "ActorDiedError", actor: "Helper-1" })
    }
    await expect(take(h1.pid())).rejects.toBeInstanceOf(ActorDiedError)
    // A small value travelled inline with the result: the owner still has it.
    expect((await cluster.get(small)).sum()).toBe(16)
    expect(await eventually(() => isGone(pid), (gone) => gone)).toBe(true)
    expect(Object.keys((await cluster.inspect()).processes)).not.toContain("Helper-1")
    const fromWorker = w.make(LARGE)
    const fromHelper = h0.make(LARGE)
    expect(await take(h0.sum(fromWorker))).toBe(LARGE / 4)
    expect(await take(w.sum(fromHelper))).toBe(LARGE / 4)
    for (const ref of [small, large, busy, made, queued, fromWorker, fromHelper]) ref.release()
  })
})

describe("the Effect face", () => {
  it("runs the cluster as a scoped layer with typed failures", async () => {
    const program = Effect.gen(function* () {
      const [x, y] = yield* TensorlaneCluster.spawn(Helper, { count: 2 })
      const ref = x.make(LARGE)
      const sum = y.sum(ref)
      const total = yield* TensorlaneCluster.get(sum)
      const value = yield* TensorlaneCluster.get(ref)
      const unknown = yield* Effect.flip(TensorlaneCluster.spawn(Misconfigured))
      const busy = x.busy(1_000)
      const late = yield* Effect.flip(TensorlaneCluster.get(busy, { timeoutMs: 50 }))
      yield* TensorlaneCluster.get(busy)
      const pidRef = x.pid()
      const pid = yield* TensorlaneCluster.get(pidRef)
      for (const r of [ref, sum, busy, pidRef]) r.release()
      const inspection = yield* TensorlaneCluster.inspect()
      return { total, numel: value.numel, unknown, late, pid, objects: inspection.processes }
    })
    const result = await Effect.runPromise(program.pipe(Effect.provide(TensorlaneCluster.layer())))
    expect(result.total).toBe(LARGE / 4)
    expect(result.numel).toBe(LARGE / 4)
    expect(result.unknown._tag).toBe("UnknownTransportError")
    expect(result.late._tag).toBe("TimeoutError")
    expect(Object.keys(result.objects).sort()).toEqual(["Helper-0", "Helper-1", "driver"])
    // The layer's scope shut the cluster down.
    expect(await eventually(() => isGone(result.pid), (gone) => gone)).toBe(true)
  })
})
