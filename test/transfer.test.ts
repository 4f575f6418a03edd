/**
 * Transfers between actors and the driver over object-store (inline and through the agents) and the
 * tmpfile fixture transport: copies, identity, every dtype, put/get, in-actor put/get, mutability,
 * progress while the producer is busy, and metrics. One cluster for the file.
 */
import * as fs from "node:fs"
import { type ActorHandle, type Cluster, type GetOptions, ObjectRef, Tensor, TensorlaneCluster, dtypeNames, start } from "@tensorlane/core"
import { Effect, Tracer } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"
import { Worker } from "./fixtures/actors.ts"
import { digest, nested, tensorsOf } from "./fixtures/samples.ts"
import { TMPFILE, bytesMoved, eventually, expectClean, rejection, startedMarker, tagOf, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let a: ActorHandle<typeof Worker>
let b: ActorHandle<typeof Worker>
let c: ActorHandle<typeof Worker>
let h: ActorHandle<typeof Helper>
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

const SMALL = 1024 // bytes: travels inline with the owner's messages
const LARGE = 1 << 20 // bytes: served by the producer's agent
const cases = [
  { transport: "object-store", n: SMALL },
  { transport: "object-store", n: LARGE },
  { transport: "tmpfile", n: LARGE },
] as const

beforeAll(async () => {
  cluster = await start({ transports: [TMPFILE] })
  ;[a, b, c] = await cluster.spawn(Worker, { count: 3 })
  ;[h] = await cluster.spawn(Helper)
}, 60_000)

afterAll(() => cluster?.shutdown())
// Every test releases what it made: every store must be empty after each of them.
afterEach(() => expectClean(cluster))

describe("actors", () => {
  it("load from TypeScript and JavaScript modules", async () => {
    expect(await Promise.all([take(a.whoami()), take(c.whoami()), take(h.whoami())])).toEqual(["Worker-0", "Worker-2", "Helper-0"])
    const pids = await Promise.all([take(a.pid()), take(b.pid()), take(h.pid())])
    expect(new Set([process.pid, ...pids]).size).toBe(4)
  })
})

describe("copies and identity", () => {
  it.each(cases)("each consumer gets its own copy ($transport, $n bytes)", async ({ transport, n }) => {
    const numel = n / 4
    const ref = a.make.options({ tensorTransport: transport })(n)
    // Consumers overwrite what they received; nobody else may see it.
    expect(await take(b.fillSum(ref, 7))).toBe(7 * numel)
    expect(await take(h.fillSum(ref, 5))).toBe(5 * numel)
    expect(await take(c.sum(ref))).toBe(numel)
    const mine = await cluster.get(ref)
    mine.fill_(3)
    expect((await cluster.get(ref)).sum()).toBe(numel)
    expect(await take(a.sum(ref))).toBe(numel)
    ref.release()
  })

  it("warns once when calls of an object's producer and of another actor both take it (the producer's may change what the other receives)", async () => {
    const warnings: Array<string> = []
    const listen = (warning: Error) => {
      if (warning.name === "TensorlaneMutabilityWarning") warnings.push(warning.message)
    }
    process.on("warning", listen)
    const apart = a.make(SMALL)
    const plain = a.whoami()
    const shared = a.make(SMALL)
    try {
      await take(b.numel(apart))
      await take(c.numel(apart))
      await take(a.digest(plain))
      await take(b.digest(plain))
      await take(b.numel(shared))
      await take(a.numel(shared))
      await take(c.numel(shared))
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toEqual([expect.stringMatching(new RegExp(`^object ${shared.id} is passed to ${a.actorId}, its producer, and to ${b.actorId}: objects are mutable`))])
    } finally {
      process.off("warning", listen)
      for (const r of [apart, plain, shared]) r.release()
    }
  })

  it.each(cases)("a ref passed back to its producer is the very tensor ($transport, $n bytes)", async ({ transport, n }) => {
    const ref = a.keep.options({ tensorTransport: transport })(n)
    const other = b.keep(n)
    expect(await take(a.isKept(ref))).toBe(true)
    // b keeps a tensor of its own: what it receives from a is a copy, not that one nor a's.
    expect(await take(b.isKept(ref))).toBe(false)
    expect(await take(b.isKept(other))).toBe(true)
    ref.release()
    other.release()
  })
})

describe("every dtype, nested in objects, arrays and Maps", () => {
  const check = (got: ReturnType<typeof nested>, expected: ReturnType<typeof nested>) => {
    expect(got.label).toBe(expected.label)
    expect(got.list[2]).toBe(42)
    expect(got.byDtype).toBeInstanceOf(Map)
    const pairs = tensorsOf(got)
    const wanted = tensorsOf(expected)
    expect(pairs.map(([path, t]) => `${path} ${t.dtype}`)).toEqual(wanted.map(([path, t]) => `${path} ${t.dtype}`))
    expect(new Set(pairs.map(([, t]) => t.dtype))).toEqual(new Set(dtypeNames))
    pairs.forEach(([path, t], i) => expect(t.equal(wanted[i][1]), path).toBe(true))
    expect(digest(got)).toEqual(digest(expected))
  }

  // 8 elements per tensor stay under the inline limit in total; 8192 do not.
  it.each([
    { transport: "object-store", n: 8 },
    { transport: "object-store", n: 8192 },
    { transport: "tmpfile", n: 8 },
    { transport: "tmpfile", n: 8192 },
  ])("round-trip actor -> driver and actor -> actor ($transport, $n elements)", async ({ transport, n }) => {
    const seed = n + transport.length
    const expected = nested(n, seed)
    const ref = a.nested.options({ tensorTransport: transport })(n, seed)
    check(await cluster.get(ref), expected)
    expect(await take(b.digest(ref))).toEqual(digest(expected))
    check(await cluster.get(ref, { useObjectStore: true }), expected)
    // Into tensors the caller provides, in the value's tensor order.
    const target = tensorsOf(expected).map(([, t]) => Tensor.zeros(t.shape, { dtype: t.dtype }))
    const into = await cluster.get(ref, { target })
    expect(into.first).toBe(target[0])
    check(into, expected)
    // A strided view would take the bytes in one run, onto the wrong elements: refused, and left as it was.
    const strided = tensorsOf(expected).map(([, t]) => Tensor.zeros([...t.shape.slice(0, -1), t.shape.at(-1)! * 2], { dtype: t.dtype }).slice(t.shape.length - 1, 0, t.shape.at(-1)! * 2, 2))
    expect(tagOf(await rejection(cluster.get(ref, { target: strided })))).toBe("ShapeError")
    expect(strided.every((t) => t.contiguousBytes().every((b) => b === 0))).toBe(true)
    ref.release()
  })

  it("a call whose small objects together pass the message limit fails with MessageTooLargeError, naming them", async () => {
    // 1025 objects of 64 KiB, each inline: their bytes would all travel inside the call's message.
    const refs = await Promise.all(Array.from({ length: 1025 }, () => cluster.put(Tensor.zeros([16384], { dtype: "float32" }))))
    const own = b.make(1 << 20)
    await take(b.numel(own))
    // Released just before: its free rides on the call that cannot be sent, and must still reach b.
    own.release()
    const error = await rejection(take(b.digest(refs)))
    expect(tagOf(error)).toBe("MessageTooLargeError")
    expect((error as Error).message).toMatch(/1025 small objects.*Pass fewer of them per call/)
    expect(await eventually(async () => (await cluster.inspect()).processes[b.actorId].primary, (ids) => !ids.includes(own.id))).not.toContain(own.id)
    for (const ref of refs) ref.release()
  })

  it.each([
    { transport: "object-store", n: 8 },
    { transport: "object-store", n: 8192 },
    { transport: "tmpfile", n: 8192 },
  ])("driver -> actor by put and by value ($transport, $n elements)", async ({ transport, n }) => {
    const expected = nested(n, 7)
    const ref = await cluster.put(expected, { tensorTransport: transport })
    expect(await take(b.digest(ref))).toEqual(digest(expected))
    expect(await take(b.digest(expected))).toEqual(digest(expected))
    check(await cluster.get(ref), expected)
    ref.release()
  })
})

describe("put and get", () => {
  it("the driver puts with tmpfile and object-store; actors and the driver read it", async () => {
    const numel = LARGE / 4
    const put = await cluster.put(Tensor.full([numel], 4, { dtype: "float32" }), { tensorTransport: "tmpfile" })
    const [file] = (await cluster.inspect()).processes.driver.registrations
    expect(fs.existsSync(file)).toBe(true)
    expect(await take(b.sum(put))).toBe(4 * numel)
    expect((await cluster.get(put)).sum()).toBe(4 * numel)
    const viaStore = await cluster.put(Tensor.arange(numel, { dtype: "int32" }))
    expect(await take(h.sum(viaStore))).toBe((numel * (numel - 1)) / 2)
    expect((await cluster.get(viaStore)).equal(Tensor.arange(numel, { dtype: "int32" }))).toBe(true)
    put.release()
    viaStore.release()
    await expectClean(cluster)
    expect(fs.existsSync(file)).toBe(false)
  })

  it("a per-call transport registers the result with that transport until released", async () => {
    const ref = a.make.options({ tensorTransport: "tmpfile" })(LARGE)
    expect(await take(b.numel(ref))).toBe(LARGE / 4)
    const held = (await cluster.inspect()).processes[a.actorId]
    expect(held.primary).toEqual([ref.id])
    expect(held.registrations).toHaveLength(1)
    expect(fs.statSync(held.registrations[0]).size).toBe(LARGE)
    const plain = a.make(LARGE)
    await take(b.numel(plain))
    expect((await cluster.inspect()).processes[a.actorId].registrations).toEqual(held.registrations)
    ref.release()
    plain.release()
    await expectClean(cluster)
    expect(fs.existsSync(held.registrations[0])).toBe(false)
  })

  it.each(["object-store", "tmpfile"])("an actor puts (%s), another actor gets", async (transport) => {
    const numel = LARGE / 4
    const refs = a.putTwo(LARGE, transport)
    expect(await take(b.getSums(refs, false))).toEqual([2 * numel, 3 * numel])
    expect(await take(c.getSums(refs, true))).toEqual([2 * numel, 3 * numel])
    // The driver owns the put objects too: it can read them through the refs it receives.
    const inner = await cluster.get(refs)
    expect(inner.every((r) => r instanceof ObjectRef)).toBe(true)
    const [two, three] = await cluster.get(inner as [ObjectRef<Tensor>, ObjectRef<{ t: Tensor }>])
    expect(two.sum()).toBe(2 * numel)
    expect(three.t.sum()).toBe(3 * numel)
    for (const r of inner) r.release()
    refs.release()
    expect(await take(a.putGetSame(SMALL))).toBe(true)
    await expectClean(cluster)
  })
})

describe("mutability (DESIGN §3.7)", () => {
  it("without waitTensorFreed the consumer sees an in-place update made before the transfer", async () => {
    const numel = LARGE / 4
    const ref = a.keep(LARGE)
    expect(await take(a.mutateKept(2, false))).toBe(2 * numel)
    expect(await take(b.sum(ref))).toBe(2 * numel)
    ref.release()
  })

  it("with waitTensorFreed the update waits until the object is freed", async () => {
    const numel = LARGE / 4
    const ref = a.keep(LARGE)
    const mutated = a.mutateKept(3, true)
    expect(await take(b.sum(ref))).toBe(numel)
    expect(tagOf(await rejection(cluster.get(mutated, { timeoutMs: 300 })))).toBe("TimeoutError")
    ref.release()
    expect(await cluster.get(mutated)).toBe(3 * numel)
    mutated.release()
  })
})

describe("progress while the producer is busy", () => {
  it("an object-store transfer completes during a 3 s busy loop of the producer", async () => {
    const n = 8 << 20
    const ref = a.make(n)
    expect(await take(a.numel(ref))).toBe(n / 4)
    const marker = startedMarker()
    try {
      const busy = a.busy(3_000, marker.file)
      await marker.started()
      const before = Date.now()
      expect(await take(b.sum(ref))).toBe(n / 4)
      expect((await cluster.get(ref)).numel).toBe(n / 4)
      const after = Date.now()
      const { start: began, end } = await cluster.get(busy)
      expect(began).toBeLessThanOrEqual(before)
      expect(after).toBeLessThan(end)
      busy.release()
    } finally {
      marker.done()
    }
    ref.release()
  })
})

describe("metrics", () => {
  it("tensorlane_transfer_bytes counts the bytes of agent transfers, per transport", async () => {
    const store = await bytesMoved("object-store")
    const tmp = await bytesMoved("tmpfile")
    const ref = a.make(LARGE)
    expect(await take(b.numel(ref))).toBe(LARGE / 4)
    expect(await bytesMoved("object-store")).toBe(store + LARGE)
    await cluster.get(ref)
    expect(await bytesMoved("object-store")).toBe(store + 2 * LARGE)
    // Inline values move with the owner's messages: no transfer.
    const small = a.make(SMALL)
    await take(b.numel(small))
    expect(await bytesMoved("object-store")).toBe(store + 2 * LARGE)
    const viaTmp = a.make.options({ tensorTransport: "tmpfile" })(LARGE)
    await take(c.numel(viaTmp))
    expect(await bytesMoved("tmpfile")).toBe(tmp + LARGE)
    // A method's own gets report their transfers with its result.
    const puts = a.putTwo(LARGE, "object-store")
    const before = await bytesMoved("object-store")
    await take(b.getSums(puts, false))
    expect(await bytesMoved("object-store")).toBe(before + 2 * LARGE)
    for (const r of [ref, small, viaTmp, puts]) r.release()
  })

  it("every transfer is a tensorlane.transfer span in the tracer of the Effect that built the cluster's layer", async () => {
    const spans: Array<Tracer.Span> = []
    const tracer = Tracer.make({
      span: (options) => {
        const span = Tracer.nativeTracer.span(options)
        spans.push(span)
        return span
      },
    })
    const program = Effect.gen(function* () {
      const [x, y] = yield* TensorlaneCluster.spawn(Worker, { count: 2 })
      const made = x.make(LARGE)
      const counted = y.numel(made)
      yield* TensorlaneCluster.get(counted)
      made.release()
      counted.release()
      return { made: made.id, from: x.actorId, to: y.actorId }
    })
    const began = Date.now()
    const { made, from, to } = await Effect.runPromise(program.pipe(Effect.provide(TensorlaneCluster.layer()), Effect.withTracer(tracer)))
    const ended = Date.now()
    const transfers = spans.filter((s) => s.name === "tensorlane.transfer")
    expect(transfers.map((s) => Object.fromEntries(s.attributes))).toEqual([{ transport: "object-store", from, to, objectId: made, bytes: LARGE }])
    const status = transfers[0]!.status
    if (status._tag !== "Ended") throw new Error("the transfer's span did not end")
    // Timed by the receiving actor, on the epoch clock the tracer's other spans use.
    expect(status.endTime).toBeGreaterThan(status.startTime)
    expect(Number(status.startTime / 1_000_000n)).toBeGreaterThanOrEqual(began - 1)
    expect(Number(status.endTime / 1_000_000n)).toBeLessThanOrEqual(ended + 1)
  })
})
