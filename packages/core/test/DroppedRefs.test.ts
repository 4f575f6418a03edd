/**
 * The driver's count of what objects made since its last collection hold at their producers: an
 * incremental collection past half the allowance (in bytes, or in objects), a full one past all of
 * it, none for objects released by hand, and a fresh count after each.
 */
import { describe, expect, it, vi } from "vitest"
import { DroppedRefs, MAX_UNPROVEN_OBJECTS, droppedRefAllowance } from "../src/internal/driver/DroppedRefs.js"
import type { Entry } from "../src/internal/objectDirectory.js"

const MiB = 1 << 20

/** A ready object whose one tensor holds `nbytes`. */
const entry = (id: string, nbytes: number): Entry =>
  ({
    id,
    info: { tensors: [{ dtype: "uint8", shape: [nbytes], nbytes }] },
  }) as unknown as Entry

const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("DroppedRefs", () => {
  it("starts an incremental collection past half the allowance, runs a full one past all of it, then counts afresh", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 2; i++) dropped.made(entry(`o${i}`, MiB))
    expect(dropped.markings).toBe(0)
    dropped.made(entry("o2", MiB))
    expect(dropped.markings).toBe(1)
    // Objects made while the marking runs count beside those it has yet to prove dropped.
    dropped.made(entry("o3", MiB))
    await nextTask()
    expect(dropped.collections).toBe(0)
    dropped.made(entry("o4", MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
    // Objects made before the collection no longer count, whether freed since or not.
    dropped.freed(entry("o0", MiB))
    for (let i = 5; i < 7; i++) dropped.made(entry(`o${i}`, MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
    expect(dropped.markings).toBe(1)
  })

  it("leaves the collection to V8's incremental marking: dropped objects are freed without a full collection of the driver's", async () => {
    const gc = vi.fn()
    vi.stubGlobal("gc", gc)
    try {
      const dropped = new DroppedRefs(4 * MiB)
      const freed = new Set<string>()
      const refs = new FinalizationRegistry<string>((id) => {
        freed.add(id)
        dropped.freed(entry(id, MiB))
      })
      for (let i = 0; i < 3; i++) {
        refs.register({}, `o${i}`)
        dropped.made(entry(`o${i}`, MiB))
      }
      expect(dropped.markings).toBe(1)
      await vi.waitFor(() => expect(freed.size).toBe(3), { timeout: 5_000, interval: 50 })
      // The marking has ended: what it proved is no longer counted, so 3 MiB more start another.
      for (let i = 3; i < 6; i++) dropped.made(entry(`o${i}`, MiB))
      await nextTask()
      expect(dropped.markings).toBe(2)
      expect(dropped.collections).toBe(0)
      expect(gc).not.toHaveBeenCalled()
    } finally {
      vi.unstubAllGlobals()
    }
  })

  it("never collects for objects released as they come, nor for values without tensors", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 100; i++) {
      const made = entry(`o${i}`, MiB)
      dropped.made(made)
      dropped.made(entry(`v${i}`, 0))
      dropped.freed(made)
    }
    await nextTask()
    expect(dropped.collections).toBe(0)
    expect(dropped.markings).toBe(0)
  })

  it("never collects for one object alone, however large: a loop that releases each result pays nothing; a second one collects", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 10; i++) {
      const made = entry(`o${i}`, 8 * MiB)
      dropped.made(made)
      await nextTask()
      dropped.freed(made)
    }
    expect(dropped.markings).toBe(0)
    expect(dropped.collections).toBe(0)
    dropped.made(entry("kept", 8 * MiB))
    dropped.made(entry("next", 8 * MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("collects past MAX_UNPROVEN_OBJECTS objects however small they are, incrementally past half of them", async () => {
    const dropped = new DroppedRefs(Number.MAX_SAFE_INTEGER)
    for (let i = 0; i <= MAX_UNPROVEN_OBJECTS / 2; i++) dropped.made(entry(`o${i}`, 4))
    expect(dropped.markings).toBe(1)
    for (let i = MAX_UNPROVEN_OBJECTS / 2 + 1; i <= MAX_UNPROVEN_OBJECTS; i++) dropped.made(entry(`o${i}`, 4))
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("allows half the host cache, and at least 16 MiB", () => {
    expect(droppedRefAllowance(1 << 30)).toBe(512 * MiB)
    expect(droppedRefAllowance(0)).toBe(16 * MiB)
  })
})
