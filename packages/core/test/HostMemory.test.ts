/**
 * The default host allocator's recycling of large storages (internal/hostMemoryCache.ts): fresh
 * memory while fewer than a size's allowance of blocks (two at first) are out, a collection on a miss
 * beyond that, and idle collections, once a size has its allowance out and none idle, that leave the
 * dropped memory waiting, warm, for the next allocations and raise the allowance. Recycled memory is
 * recognised by a marker byte (fresh memory is zero).
 */
import { describe, expect, it } from "vitest"
import { cpuAllocator, recycleHostMemory } from "../src/CpuMemory.js"
import { countedGc, onCollectionClock } from "./helpers/gc.ts"

// Small enough that V8's own external-memory heuristics start no collection during a test.
const BYTES = 4 << 20
/** A drop worth any collection: faulting 1 GiB in costs more than this worker's collections. */
const PLENTY = 1 << 30

const collections = countedGc()

/** Allocates, marks and drops a storage; a WeakRef created in this job keeps it alive until the job ends. */
const allocateAndDrop = (marker: number, bytes = BYTES): void => {
  cpuAllocator.allocate(bytes).bytes[0] = marker
}

/** The first byte of a new storage, which then stays reachable only through the returned value. */
const firstByteOfNew = (byteLength = BYTES): { first: number; keep: Uint8Array } => {
  const bytes = cpuAllocator.allocate(byteLength).bytes
  return { first: bytes[0], keep: bytes }
}

const nextJob = () => new Promise((resolve) => setImmediate(resolve))

describe("host memory recycling", () => {
  it("takes fresh memory while fewer than two blocks are out, then collects on a miss and reuses a dead block", async () => {
    // One block of this size is out and dead, but unproven: no collection, fresh memory.
    allocateAndDrop(7)
    await nextJob()
    const before = collections.count
    const second = firstByteOfNew()
    expect(second.first).toBe(0)
    expect(collections.count).toBe(before)
    second.keep[0] = 9
    second.keep = new Uint8Array(0)
    await nextJob()
    // Two blocks out: a miss collects, and one of the dead blocks comes back.
    const third = firstByteOfNew()
    expect(collections.count).toBe(before + 1)
    expect([7, 9]).toContain(third.first)
  })

  it("an idle collection waits until a size has its allowance out and none idle, recycles them all, and raises the allowance", async () => {
    // A size of its own, so that the previous test's blocks play no part.
    const bytes = 6 << 20
    allocateAndDrop(11, bytes)
    await nextJob()
    const before = collections.count
    recycleHostMemory(PLENTY)
    expect(collections.count).toBe(before)
    allocateAndDrop(12, bytes)
    await nextJob()
    recycleHostMemory(PLENTY)
    expect(collections.count).toBe(before + 1)
    // Both dropped blocks are warm for the next allocations, with no collection.
    expect([firstByteOfNew(bytes).first, firstByteOfNew(bytes).first].sort()).toEqual([11, 12])
    await nextJob()
    // Two blocks out again, but the allowance is three now: fresh memory, no collection.
    expect(firstByteOfNew(bytes).first).toBe(0)
    expect(collections.count).toBe(before + 1)
  })

  it("an idle collection runs only for at least 1 MiB dropped", () => {
    const before = collections.count
    recycleHostMemory(64 << 10)
    expect(collections.count).toBe(before)
  })

  it("one slow collection rules out collections for twenty times its own time", async () => {
    const dropped = 64 << 20
    // Eight blocks of a size held (more than a fresh cache lets it have out) and none idle: every
    // idle collection is due, if it pays.
    const held = Array.from({ length: 8 }, () => cpuAllocator.allocate(7 << 20))
    await onCollectionClock(collections, 80, () => {
      recycleHostMemory(PLENTY)
      collections.collectionMs = 0
      const before = collections.count
      // 80 ms is more than faulting in 64 MiB is assumed to cost (about 34 ms at 2 GB/s).
      recycleHostMemory(dropped)
      expect(collections.count).toBe(before)
      // Past a second, but not past twenty times the 80 ms: still ruled out (a program whose own heap
      // makes every collection slow would otherwise pay one each second).
      collections.clockMs += 1100
      recycleHostMemory(dropped)
      expect(collections.count).toBe(before)
      collections.clockMs += 600
      recycleHostMemory(dropped)
      expect(collections.count).toBe(before + 1)
    })
    // Reachable until here, so that no collection recycles them.
    expect(held).toHaveLength(8)
  })
})
