/**
 * What the driver accepts and what it refuses, typed: refs and actor handles only with the cluster
 * that made them, values that cannot travel, malformed options, refs their holder released, and a
 * CPU memory pool whose released results come back to it.
 */
import { type ActorHandle, type Cluster, type ObjectRef, Tensor, defineActor, method, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PoolWorker, Worker } from "./fixtures/actors.ts"
import { SOCKETPAIR, expectClean, take as takeFrom, thrown } from "./helpers.ts"

let a: Cluster
let b: Cluster
let wa: ActorHandle<typeof Worker>
let wb: ActorHandle<typeof Worker>
let pool: ActorHandle<typeof PoolWorker>

beforeAll(async () => {
  ;[a, b] = await Promise.all([start({ transports: [SOCKETPAIR] }), start({ transports: [SOCKETPAIR] })])
  ;[[wa], [wb], [pool]] = await Promise.all([a.spawn(Worker), b.spawn(Worker), b.spawn(PoolWorker)])
}, 60_000)

afterAll(async () => {
  await a?.shutdown()
  await b?.shutdown()
})

describe("refs and handles are bound to their cluster", () => {
  it("a ref of one cluster is refused by another, whose ids repeat", async () => {
    await refusedAcross()
    await expectClean(a)
  })

  const refusedAcross = async () => {
    using ra = await a.put(222)
    using rb = await b.put(111)
    expect(ra.id).toBe(rb.id)
    expect(ra.clusterId).toBe(a.id)
    await expect(b.get(ra)).rejects.toMatchObject({ _tag: "WrongClusterError" })
    await expect(b.get([rb, ra])).rejects.toMatchObject({ _tag: "WrongClusterError" })
    expect(thrown(() => wb.digest(ra))).toMatchObject({ _tag: "WrongClusterError" })
    expect(thrown(() => wb.digest({ nested: [ra] }))).toMatchObject({ _tag: "WrongClusterError" })
    await expect(b.put({ inner: ra })).rejects.toMatchObject({ _tag: "WrongClusterError" })
    await expect(b.broadcast(ra, [wb])).rejects.toMatchObject({ _tag: "WrongClusterError" })
    expect(await a.get(ra)).toBe(222)
    expect(await b.get(rb)).toBe(111)
  }

  it("a handle of one cluster is refused by another, even under an actor id that exists there", async () => {
    expect(wa.actorId).toBe(wb.actorId)
    await expect(b.createCollectiveGroup([wa, pool], { backend: "socketpair" })).rejects.toMatchObject({ _tag: "WrongClusterError" })
    using rb = await b.put(Tensor.ones([4]))
    await expect(b.broadcast(rb, [wa])).rejects.toMatchObject({ _tag: "WrongClusterError" })
    await expect(b.createCollectiveGroup([{ actorId: wb.actorId }, pool], { backend: "socketpair" })).rejects.toMatchObject({
      _tag: "InvalidArgumentError",
      argument: "actor",
    })
    expect(b.listGroups()).toEqual([])
  })

  it("a shut-down cluster's refs and handles are refused by it and by any other", async () => {
    const c = await start()
    const [wc] = await c.spawn(Worker)
    const rc = await c.put(333)
    await c.shutdown()
    await expect(c.get(rc)).rejects.toMatchObject({ _tag: "ClusterClosedError" })
    await expect(b.get(rc)).rejects.toMatchObject({ _tag: "ClusterClosedError" })
    expect(thrown(() => wb.digest(rc))).toMatchObject({ _tag: "ClusterClosedError" })
    await expect(b.createCollectiveGroup([wc, wb], { backend: "socketpair" })).rejects.toMatchObject({ _tag: "ClusterClosedError" })
  })
})

describe("bad inputs get typed errors that say what was wrong", () => {
  it("get of something that is not a ref", async () => {
    using ref = await b.put(1)
    await expect(b.get(42 as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "refs", message: expect.stringContaining("not 42") })
    await expect(b.get([ref, 5] as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining("element 1 is 5") })
    await expect(b.get(undefined as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError" })
  })

  it("values that cannot travel, in put, in arguments and in results, name where they are", async () => {
    class Point {
      constructor(readonly x: number) {}
    }
    const cases: Array<[unknown, string]> = [
      [() => 1, "a function"],
      [{ a: [1, Symbol("s")] }, "value.a[1] cannot travel"],
      [new WeakMap(), "WeakMap"],
      [Promise.resolve(1), "a Promise"],
      [new Map([["k", { f: () => 1 }]]), 'get("k").f'],
      [new Point(1), "an instance of Point"],
      [new SharedArrayBuffer(8), "SharedArrayBuffer"],
      [{ a: { "\u0000tensorlane:tensor": true } }, "value.a cannot travel to another process: it is an object holding a key that tensorlane keeps"],
      [[{ "\u0000tensorlane:ref": "x" }], "value[0] cannot travel"],
      [{ e: new Error("e", { cause: () => 1 }) }, "an object V8 copies as it is (an Error, a Date, a typed array) holds what V8 cannot copy"],
    ]
    for (const [value, says] of cases) {
      const message = says.replace(/^value/, "the put value")
      await expect(b.put(value)).rejects.toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining(message) })
      expect(thrown(() => wb.digest(value))).toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining(says.replace(/^value/, "argument[0]")) })
    }
    await expect(takeFrom(b)(wb.returnFunction())).rejects.toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining("the result cannot travel") })
    // Dates, typed arrays, errors and boxed values travel as they are.
    const fine = { d: new Date(5), r: /x/g, e: new RangeError("r"), u: new Uint16Array([1, 2]), n: Object(3) }
    expect(await takeFrom(b)(wb.digest(fine))).toEqual(await takeFrom(b)(wb.digest(fine)))
    await expectClean(b)
  })

  it("nesting deeper than the limit is refused, not a RangeError", async () => {
    let deep: unknown = 1
    for (let i = 0; i < 10_000; i++) deep = [deep]
    await expect(b.put(deep)).rejects.toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining("nested deeper than 1000 levels") })
    expect(thrown(() => wb.digest(deep))).toMatchObject({ _tag: "InvalidArgumentError" })
  })

  it("time limits that are not numbers >= 0", async () => {
    using ref = await b.put(1)
    for (const timeoutMs of [Number.NaN, -1, "5"] as Array<never>) {
      await expect(b.get(ref, { timeoutMs })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "timeoutMs" })
      await expect(b.broadcast(ref, [wb], { timeoutMs })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "timeoutMs" })
      await expect(b.createCollectiveGroup([wb, pool], { backend: "socketpair", timeoutMs })).rejects.toMatchObject({ _tag: "InvalidArgumentError" })
      await expect(b.inspect({ timeoutMs })).rejects.toMatchObject({ _tag: "InvalidArgumentError" })
    }
    await expect(start({ transferTimeoutMs: Number.NaN })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "transferTimeoutMs" })
    await expect(takeFrom(b)(wb.waitFreed(Number.NaN))).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "timeoutMs" })
    // Beyond what Node's timers hold (about 24.8 days): still a wait, not an immediate timeout.
    expect(await b.get(ref, { timeoutMs: 1e12 })).toBe(1)
    expect(b.listGroups()).toEqual([])
  })

  it("spawn and createCollectiveGroup of things that are not definitions, handles or options", async () => {
    await expect(b.spawn({} as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "definition" })
    await expect(b.createCollectiveGroup(wb as never, { backend: "socketpair" })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "actors" })
    await expect(b.createCollectiveGroup([wb, pool], undefined as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "backend" })
    // Refused before any member hears of it, not a wait for members that drop the request.
    await expect(b.createCollectiveGroup([], { backend: "socketpair" })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "actors" })
    for (const name of [5, "", null, "g".repeat(257), "a\0b"] as Array<never>) {
      await expect(b.createCollectiveGroup([wb, pool], { backend: "socketpair", name, timeoutMs: 60_000 })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "name" })
    }
    expect(b.listGroups()).toEqual([])
  })

  it("null or an array for options, and what is not a ref where one is needed", async () => {
    const ref = await b.put(1)
    for (const options of [null, [], 5] as Array<never>) {
      await expect(b.spawn(Worker, options)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "options" })
      await expect(b.put(1, options)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "options" })
      await expect(b.get(ref, options)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "options" })
      await expect(b.inspect(options)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "options" })
      await expect(b.broadcast(ref, [wb], options)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "options" })
    }
    ref.release()
    for (const notARef of [{}, undefined, "driver.1"] as Array<never>) {
      expect(thrown(() => b.cancel(notARef))).toMatchObject({ _tag: "InvalidArgumentError", argument: "ref" })
      await expect(b.broadcast(notARef, [wb])).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "ref" })
    }
    await expectClean(b)
  })

  it("spawn's env maps names to strings, checked before any process starts", async () => {
    const before = Object.keys((await b.inspect()).processes)
    for (const env of ["X=1", ["X"], { X: 5 }, { X: "a\0b" }, { "A=B": "x" }, { "": "x" }] as Array<never>) {
      await expect(b.spawn(Worker, { env })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "env" })
    }
    expect(Object.keys((await b.inspect()).processes).sort()).toEqual(before.sort())
  })

  it("actor definitions, method options and transport names of the wrong kind", async () => {
    const methods = { ping: () => 1 }
    for (const maxConcurrency of [Number.NaN, 0, 1.5, "2", -1] as Array<never>) {
      expect(thrown(() => defineActor(import.meta.url, "Bad", { init: () => ({}), methods, maxConcurrency }))).toMatchObject({
        _tag: "InvalidArgumentError",
        argument: "spec.maxConcurrency",
      })
    }
    expect(defineActor(import.meta.url, "Unbounded", { init: () => ({}), methods, maxConcurrency: Infinity }).spec.maxConcurrency).toBe(Infinity)
    const init = () => ({})
    const wrongDefinitions: Array<[unknown, unknown, unknown, string]> = [
      [undefined, "Bad", { init, methods }, "moduleUrl"],
      ["", "Bad", { init, methods }, "moduleUrl"],
      [import.meta.url, undefined, { init, methods }, "name"],
      [import.meta.url, "", { init, methods }, "name"],
      [import.meta.url, "not an export", { init, methods }, "name"],
      [import.meta.url, "A".repeat(65), { init, methods }, "name"],
      [import.meta.url, "my actor", { init, methods }, "name"],
      [import.meta.url, "Bad", undefined, "spec"],
      [import.meta.url, "Bad", { methods }, "spec.init"],
      [import.meta.url, "Bad", { init }, "spec.methods"],
    ]
    for (const [url, name, spec, argument] of wrongDefinitions) {
      expect(thrown(() => defineActor(url as never, name as never, spec as never))).toMatchObject({ _tag: "InvalidArgumentError", argument })
    }
    for (const name of ["℘eierstrass", "Ünïcode_$", `A${"·".repeat(63)}`]) expect(defineActor(import.meta.url, name, { init, methods }).name).toBe(name)
    expect(thrown(() => method(null as never, () => 1))).toMatchObject({ _tag: "InvalidArgumentError", argument: "method options" })
    expect(method(undefined as never, () => 1).options).toEqual({})
    expect(thrown(() => method({}, 5 as never))).toMatchObject({ _tag: "InvalidArgumentError", argument: "fn" })
    expect(thrown(() => wb.digest.options(5 as never))).toMatchObject({ _tag: "InvalidArgumentError", argument: "digest.options" })
    expect(await takeFrom(b)(wb.digest.options(undefined as never)(1))).toEqual(await takeFrom(b)(wb.digest(1)))
    expect(thrown(() => wb.digest.options({ tensorTransport: 5 as never })(1))).toMatchObject({ _tag: "InvalidArgumentError", argument: "tensorTransport" })
    await expect(b.put(Tensor.ones([4]), { tensorTransport: 5 as never })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "tensorTransport" })
  })

  it("broadcast receivers and get targets of the wrong kind", async () => {
    using ref = await b.put(Tensor.ones([4]))
    await expect(b.broadcast(ref, wb as never)).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "receivers" })
    for (const target of ["x", [Tensor.zeros([4]), 5], {}] as Array<never>) {
      await expect(b.get(ref, { target })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "target" })
    }
    expect((await b.get(ref)).sum()).toBe(4)
  })
})

describe("a ref its holder released", () => {
  it("fails as an argument and in put, while another holder keeps the object", async () => {
    const ref = wb.make(16)
    using outer = await b.put({ inner: ref })
    ref.release()
    expect(thrown(() => wb.sum(ref))).toMatchObject({ _tag: "ObjectFreedError", objectId: ref.id })
    await expect(b.put([ref])).rejects.toMatchObject({ _tag: "ObjectFreedError" })
    await expect(b.get(ref)).rejects.toMatchObject({ _tag: "ObjectFreedError" })
    // The other holder's ref still works.
    const { inner } = (await b.get(outer)) as { inner: ObjectRef<Tensor> }
    expect(await takeFrom(b)(wb.sum(inner))).toBe(4)
    inner.release()
  })
})

describe("a CPU memory pool in an actor", () => {
  it("takes back the blocks of released results instead of running out", async () => {
    for (let i = 0; i < 12; i++) expect((await takeFrom(b)(pool.make(2 << 20))).numel).toBe(1 << 19)
    expect(await takeFrom(b)(pool.used())).toBeLessThanOrEqual(8 << 20)
    await expectClean(b)
  })
})
