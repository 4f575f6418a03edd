/**
 * The driver's count of what objects made since its last collection hold at their producers: past
 * half the allowance (in bytes, or in objects) a collection right after the program's next call (or
 * after a while without one), past all of it one at once, none for objects released by hand, and a
 * fresh count after each.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { DroppedRefs, MAX_UNPROVEN_OBJECTS, droppedRefAllowance } from "../src/internal/driver/DroppedRefs.js"
import type { Entry } from "../src/internal/objectDirectory.js"
import { writeMetas } from "../src/internal/wireMetas.js"

const MiB = 1 << 20

/** A ready object whose one tensor holds `nbytes`. */
const entry = (id: string, nbytes: number): Entry =>
  ({
    id,
    info: { tensors: writeMetas([{ dtype: "uint8", shape: [nbytes], device: "cpu" }]) },
  }) as unknown as Entry

const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("DroppedRefs", () => {
  const gc = vi.fn()
  beforeEach(() => {
    gc.mockClear()
    vi.stubGlobal("gc", gc)
  })
  afterEach(() => {
    vi.unstubAllGlobals()
  })

  it("collects right after the next call past half the allowance, at once past all of it, then counts afresh", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 3; i++) dropped.made(entry(`o${i}`, MiB))
    expect(dropped.isDue).toBe(true)
    await nextTask()
    expect(dropped.collections).toBe(0)
    // The program's next call: the collection runs once the job that made it ends.
    dropped.created()
    expect(dropped.collections).toBe(0)
    await nextTask()
    expect([dropped.collections, dropped.isDue, gc.mock.calls.length]).toEqual([1, false, 1])
    // Objects made before the collection no longer count, whether freed since or not.
    dropped.freed(entry("o0", MiB))
    for (let i = 3; i < 5; i++) dropped.made(entry(`o${i}`, MiB))
    dropped.created()
    await nextTask()
    expect(dropped.collections).toBe(1)
    // Past the whole allowance, no call awaited.
    for (let i = 5; i < 8; i++) dropped.made(entry(`o${i}`, MiB))
    await nextTask()
    expect(dropped.collections).toBe(2)
  })

  it("collects a due collection after a while without a call", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 3; i++) dropped.made(entry(`o${i}`, MiB))
    await nextTask()
    expect(dropped.collections).toBe(0)
    await vi.waitFor(() => expect(dropped.collections).toBe(1), { timeout: 2_000, interval: 20 })
    expect(dropped.isDue).toBe(false)
  })

  it("counts afresh what is made before a collection about to run, and arms nothing for it", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 3; i++) dropped.made(entry(`o${i}`, MiB))
    // A put: its object is made, the due collection is set off, then the object is ready, all in one job.
    dropped.created()
    dropped.made(entry("o3", MiB))
    await nextTask()
    expect([dropped.collections, dropped.isDue]).toEqual([1, false])
    await new Promise((resolve) => setTimeout(resolve, 150))
    dropped.created()
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("drops a due collection once the program has released what made it due, and collects none once closed", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 3; i++) dropped.made(entry(`o${i}`, MiB))
    expect(dropped.isDue).toBe(true)
    for (let i = 0; i < 2; i++) dropped.freed(entry(`o${i}`, MiB))
    dropped.created()
    await nextTask()
    expect([dropped.collections, dropped.isDue]).toEqual([0, false])
    let closed = false
    const closing = new DroppedRefs(4 * MiB, () => closed)
    for (let i = 0; i < 3; i++) closing.made(entry(`o${i}`, MiB))
    closed = true
    closing.created()
    await new Promise((resolve) => setTimeout(resolve, 150))
    expect([closing.collections, closing.isDue, gc.mock.calls.length]).toEqual([0, false, 0])
  })

  it("never collects for objects released as they come, nor for values without tensors", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 100; i++) {
      const made = entry(`o${i}`, MiB)
      dropped.made(made)
      dropped.made(entry(`v${i}`, 0))
      dropped.freed(made)
      dropped.created()
    }
    await nextTask()
    expect([dropped.collections, dropped.isDue]).toEqual([0, false])
  })

  it("never collects for one object alone, however large: a loop that releases each result pays nothing; a second one collects", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 10; i++) {
      const made = entry(`o${i}`, 8 * MiB)
      dropped.made(made)
      await nextTask()
      dropped.freed(made)
      dropped.created()
    }
    await nextTask()
    expect(dropped.collections).toBe(0)
    dropped.made(entry("kept", 8 * MiB))
    dropped.made(entry("next", 8 * MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("collects past MAX_UNPROVEN_OBJECTS objects however small they are, at the next call past half of them", async () => {
    const dropped = new DroppedRefs(Number.MAX_SAFE_INTEGER)
    for (let i = 0; i <= MAX_UNPROVEN_OBJECTS / 2; i++) dropped.made(entry(`o${i}`, 4))
    expect(dropped.isDue).toBe(true)
    for (let i = MAX_UNPROVEN_OBJECTS / 2 + 1; i <= MAX_UNPROVEN_OBJECTS; i++) dropped.made(entry(`o${i}`, 4))
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("allows the whole host cache, and at least 16 MiB", () => {
    expect(droppedRefAllowance(1 << 30)).toBe(1 << 30)
    expect(droppedRefAllowance(0)).toBe(16 * MiB)
  })
})
