/**
 * The owner's object directory alone: holders and borrows, the states of an object, waits with their
 * time limits, and the refs a value holds. Frees are observed through the directory's `onFree`.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { ObjectFreedError, TimeoutError } from "../src/Errors.js"
import type { ObjectInfo } from "../src/internal/messages.js"
import { type Entry, ObjectDirectory } from "../src/internal/objectDirectory.js"
import { writeMetas } from "../src/internal/wireMetas.js"
import { rejection, thrown } from "./helpers/errors.ts"

/** A directory that records the ids it frees, in order. */
const directory = () => {
  const freed: Array<string> = []
  const objects = new ObjectDirectory((entry) => freed.push(entry.id))
  return { objects, freed }
}

const infoOf = (entry: Entry, refs: ReadonlyArray<string> = []): ObjectInfo => ({
  objectId: entry.id,
  producer: entry.producer,
  producerAddress: "",
  transport: entry.transport,
  skeleton: new Uint8Array(0),
  tensors: writeMetas([]),
  refs,
})

/** A ready object with one holder (the driver's handle), its value holding `refs`. */
const held = (objects: ObjectDirectory, id: string, refs: ReadonlyArray<string> = []): Entry => {
  const entry = objects.create(id, "A-0", "object-store")
  objects.acquire(id)
  objects.ready(entry, infoOf(entry, refs))
  return entry
}

/** Whether a promise has settled by now, and how. */
const stateOf = async (promise: Promise<unknown>): Promise<"pending" | "resolved" | "rejected"> => {
  let state: "pending" | "resolved" | "rejected" = "pending"
  promise.then(
    () => (state = "resolved"),
    () => (state = "rejected"),
  )
  await Promise.resolve()
  await Promise.resolve()
  return state
}

describe("ObjectDirectory", () => {
  it("creates a pending entry with no holders, and refuses an id it does not hold with ObjectFreedError naming it", () => {
    const { objects } = directory()
    const entry = objects.create("A-0.1", "A-0", "object-store")
    expect(entry).toMatchObject({ id: "A-0.1", producer: "A-0", transport: "object-store", state: "pending", holders: 0 })
    expect(objects.get("A-0.1")).toBe(entry)
    expect(objects.require("A-0.1")).toBe(entry)
    expect(objects.size).toBe(1)
    expect([...objects.values()]).toEqual([entry])
    expect(objects.get("A-0.2")).toBeUndefined()
    const error = thrown(() => objects.require("A-0.2"))
    expect(error).toBeInstanceOf(ObjectFreedError)
    expect(error).toMatchObject({ objectId: "A-0.2", message: expect.stringContaining("A-0.2") })
  })

  it("frees a ready object once its last holder releases it, and only then", () => {
    const { objects, freed } = directory()
    const entry = objects.create("o", "A-0", "object-store")
    objects.acquire("o")
    objects.acquire("o")
    objects.ready(entry, infoOf(entry))
    expect(entry.state).toBe("ready")
    objects.release("o")
    expect(freed).toEqual([])
    expect(objects.get("o")).toBe(entry)
    objects.release("o")
    expect(freed).toEqual(["o"])
    expect(objects.get("o")).toBeUndefined()
    // A release after the free finds nothing: no second free.
    objects.release("o")
    expect(freed).toEqual(["o"])
  })

  it("frees nothing while the object is pending, even with no holder left; it is freed when it settles", () => {
    const { objects, freed } = directory()
    const entry = objects.create("o", "A-0", "object-store")
    objects.acquire("o", "B-0")
    objects.release("o", "B-0")
    objects.dropBorrower("B-0")
    expect(freed).toEqual([])
    expect(objects.get("o")).toBe(entry)
    objects.ready(entry, infoOf(entry))
    expect(freed).toEqual(["o"])
  })

  it("a failed pending object with no holder is freed; one that holders keep stays failed until they release it", () => {
    const { objects, freed } = directory()
    const lonely = objects.create("lonely", "A-0", "object-store")
    objects.fail(lonely, new Error("boom"))
    expect(freed).toEqual(["lonely"])
    const held = objects.create("held", "A-0", "object-store")
    objects.acquire("held")
    const error = new Error("boom")
    objects.fail(held, error)
    expect(held).toMatchObject({ state: "failed", error })
    expect(freed).toEqual(["lonely"])
    objects.release("held")
    expect(freed).toEqual(["lonely", "held"])
  })

  it("a ready object that fails later keeps its info and its holders; ready and fail after settling change nothing", () => {
    const { objects, freed } = directory()
    const entry = objects.create("o", "A-0", "object-store")
    objects.acquire("o")
    const info = infoOf(entry)
    objects.ready(entry, info)
    const first = new Error("first")
    objects.fail(entry, first)
    expect(entry).toMatchObject({ state: "failed", info, error: first, holders: 1 })
    expect(freed).toEqual([])
    objects.fail(entry, new Error("second"))
    objects.ready(entry, infoOf(entry, ["other"]))
    expect(entry).toMatchObject({ state: "failed", info, error: first })
    objects.release("o")
    expect(freed).toEqual(["o"])
  })

  it("counts borrows per actor: a release by an actor that holds no borrow is ignored", () => {
    const { objects, freed } = directory()
    const entry = held(objects, "o")
    objects.acquire("o", "B-0")
    objects.acquire("o", "B-0")
    objects.acquire("o", "C-0")
    expect(entry.holders).toBe(4)
    expect([...entry.borrowers]).toEqual([
      ["B-0", 2],
      ["C-0", 1],
    ])
    objects.release("o", "D-0")
    objects.release("o", "D-0")
    expect(entry.holders).toBe(4)
    objects.release("o", "B-0")
    expect(entry.borrowers.get("B-0")).toBe(1)
    objects.release("o", "C-0")
    expect(entry.borrowers.has("C-0")).toBe(false)
    expect(entry.holders).toBe(2)
    objects.release("o", "C-0")
    expect(entry.holders).toBe(2)
    expect(freed).toEqual([])
  })

  it("dropBorrower forgets every borrow of a dead actor across objects, and frees what only it held", () => {
    const { objects, freed } = directory()
    const [a, b, c] = ["a", "b", "c"].map((id) => held(objects, id))
    for (let i = 0; i < 3; i++) objects.acquire("a", "dead")
    objects.acquire("b", "dead")
    objects.acquire("b", "alive")
    objects.acquire("c", "alive")
    objects.release("a")
    objects.release("b")
    objects.release("c")
    expect(freed).toEqual([])
    objects.dropBorrower("dead")
    expect(freed).toEqual(["a"])
    expect(a.borrowers.size).toBe(0)
    expect(b).toMatchObject({ holders: 1, borrowers: new Map([["alive", 1]]) })
    expect(c.holders).toBe(1)
    objects.dropBorrower("dead")
    objects.dropBorrower("nobody")
    expect(freed).toEqual(["a"])
    expect([b.holders, c.holders]).toEqual([1, 1])
  })

  it("acquire and release of an id it does not hold do nothing", () => {
    const { objects, freed } = directory()
    objects.acquire("ghost", "B-0")
    objects.release("ghost", "B-0")
    objects.release("ghost")
    expect(objects.size).toBe(0)
    expect(freed).toEqual([])
  })

  it("a ready value keeps the refs inside it until it is freed, then releases each once", () => {
    const { objects, freed } = directory()
    const inner = held(objects, "inner")
    // Held twice by the value (the same ref in two places), once by the driver.
    held(objects, "outer", ["inner", "inner"])
    expect(inner.holders).toBe(3)
    objects.release("inner")
    expect(freed).toEqual([])
    objects.release("outer")
    expect(freed).toEqual(["outer", "inner"])
  })

  it("a value's refs are taken only once it is ready: a pending or failed value holds nothing", () => {
    const { objects, freed } = directory()
    const inner = held(objects, "inner")
    const outer = objects.create("outer", "A-0", "object-store")
    objects.acquire("outer")
    expect(inner.holders).toBe(1)
    objects.fail(outer, new Error("boom"))
    objects.release("outer")
    expect(freed).toEqual(["outer"])
    expect(inner.holders).toBe(1)
    objects.release("inner")
    expect(freed).toEqual(["outer", "inner"])
  })

  it("a chain of values frees inward in one release; a ref to an object already freed is passed over", () => {
    const { objects, freed } = directory()
    const [a, b, c] = ["a", "b", "c"].map((id) => objects.create(id, "A-0", "object-store"))
    objects.acquire("a")
    objects.ready(a, infoOf(a, ["b"]))
    objects.ready(b, infoOf(b, ["c", "gone"]))
    objects.ready(c, infoOf(c))
    expect(freed).toEqual([])
    objects.release("a")
    expect(freed).toEqual(["a", "b", "c"])
    expect(objects.size).toBe(0)
  })

  it("calls onFree once the entry left the directory", () => {
    const seen: Array<{ present: boolean; state: string }> = []
    const objects: ObjectDirectory = new ObjectDirectory((entry) => seen.push({ present: objects.get(entry.id) !== undefined, state: entry.state }))
    const entry = objects.create("o", "A-0", "object-store")
    objects.ready(entry, infoOf(entry))
    expect(seen).toEqual([{ present: false, state: "ready" }])
  })
})

describe("ObjectDirectory.wait", () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it("resolves at once for a settled entry, and when a pending one becomes ready or fails", async () => {
    const { objects } = directory()
    const ready = held(objects, "ready")
    expect(await objects.wait(ready, 0)).toBe(ready)
    const pending = objects.create("pending", "A-0", "object-store")
    objects.acquire("pending")
    const failing = objects.create("failing", "A-0", "object-store")
    objects.acquire("failing")
    const waits = [objects.wait(pending, 1_000), objects.wait(pending, Infinity), objects.wait(failing, 1_000)]
    expect(await stateOf(waits[0])).toBe("pending")
    expect(pending.waiters).toHaveLength(2)
    objects.ready(pending, infoOf(pending))
    objects.fail(failing, new Error("boom"))
    expect(await Promise.all(waits)).toEqual([pending, pending, failing])
    expect(pending.waiters).toHaveLength(0)
    // The settled waits leave no timer behind to fire later.
    expect(vi.getTimerCount()).toBe(0)
  })

  it("rejects with TimeoutError naming the object and the limit, and forgets its waiter; other waits go on", async () => {
    const { objects } = directory()
    const entry = objects.create("slow", "A-0", "object-store")
    objects.acquire("slow")
    const short = objects.wait(entry, 100)
    const long = objects.wait(entry, 10_000)
    vi.advanceTimersByTime(99)
    expect(await stateOf(short)).toBe("pending")
    vi.advanceTimersByTime(1)
    const error = await rejection(short)
    expect(error).toBeInstanceOf(TimeoutError)
    expect(error).toMatchObject({ timeoutMs: 100, message: "object slow was not ready within 100 ms" })
    expect(entry.waiters).toHaveLength(1)
    objects.ready(entry, infoOf(entry))
    expect(await long).toBe(entry)
  })

  it("an unbounded wait sets no timer", async () => {
    const { objects } = directory()
    const entry = objects.create("o", "A-0", "object-store")
    objects.acquire("o")
    const waiting = objects.wait(entry, Infinity)
    expect(vi.getTimerCount()).toBe(0)
    vi.advanceTimersByTime(365 * 24 * 3600 * 1000)
    expect(await stateOf(waiting)).toBe("pending")
    objects.fail(entry, new Error("boom"))
    expect(await waiting).toBe(entry)
  })
})
