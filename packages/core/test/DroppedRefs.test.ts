/**
 * The driver's count of what objects made since its last collection hold at their producers: a
 * collection once it passes the allowance (in bytes, or in objects), none for objects released by
 * hand, and a fresh count after each collection.
 */
import { describe, expect, it } from "vitest"
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
  it("collects once the live objects made since the last collection pass the allowance, then counts afresh", async () => {
    const dropped = new DroppedRefs(4 * MiB)
    for (let i = 0; i < 4; i++) dropped.made(entry(`o${i}`, MiB))
    await nextTask()
    expect(dropped.collections).toBe(0)
    dropped.made(entry("o4", MiB))
    dropped.made(entry("o5", MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
    // Objects made before the collection no longer count, whether freed since or not.
    dropped.freed(entry("o0", MiB))
    for (let i = 6; i < 10; i++) dropped.made(entry(`o${i}`, MiB))
    await nextTask()
    expect(dropped.collections).toBe(1)
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
  })

  it("collects past MAX_UNPROVEN_OBJECTS objects however small they are", async () => {
    const dropped = new DroppedRefs(Number.MAX_SAFE_INTEGER)
    for (let i = 0; i <= MAX_UNPROVEN_OBJECTS; i++) dropped.made(entry(`o${i}`, 4))
    await nextTask()
    expect(dropped.collections).toBe(1)
  })

  it("allows a quarter of the host cache, and at least 16 MiB", () => {
    expect(droppedRefAllowance(1 << 30)).toBe(256 * MiB)
    expect(droppedRefAllowance(0)).toBe(16 * MiB)
  })
})
