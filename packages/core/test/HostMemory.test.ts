/**
 * The default host allocator's recycling of large storages (Allocator.ts, HostMemoryCache): fresh
 * memory while fewer than two blocks of a size are out, a collection on a miss beyond that, and idle
 * collections that leave dropped memory waiting, warm, for the next allocation. Recycled memory is
 * recognised by a marker byte (fresh memory is zero).
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cpuAllocator, recycleHostMemory } from "../src/index.js"

// Small enough that V8's own external-memory heuristics start no collection during a test.
const BYTES = 4 << 20
/** A drop worth any collection: faulting 1 GiB in costs more than this worker's collections. */
const PLENTY = 1 << 30

let collections = 0
let slowCollectionMs = 0
const realGc = (() => {
  // vitest workers run without --expose-gc; V8 lets the flag be turned on at run time.
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc") as () => void
})()

beforeAll(() => {
  ;(globalThis as { gc?: () => void }).gc = () => {
    collections++
    realGc()
    const until = performance.now() + slowCollectionMs
    while (performance.now() < until);
  }
})

afterAll(() => {
  delete (globalThis as { gc?: () => void }).gc
})

/** Allocates, marks and drops a storage; a WeakRef created in this job keeps it alive until the job ends. */
const allocateAndDrop = (marker: number): void => {
  cpuAllocator.allocate(BYTES).bytes[0] = marker
}

/** The first byte of a new storage, which then stays reachable only through the returned value. */
const firstByteOfNew = (): { first: number; keep: Uint8Array } => {
  const bytes = cpuAllocator.allocate(BYTES).bytes
  return { first: bytes[0], keep: bytes }
}

const nextJob = () => new Promise((resolve) => setImmediate(resolve))

describe("host memory recycling", () => {
  it("takes fresh memory while fewer than two blocks are out, then collects on a miss and reuses a dead block", async () => {
    // One block of this size is out and dead, but unproven: no collection, fresh memory.
    allocateAndDrop(7)
    await nextJob()
    const before = collections
    const second = firstByteOfNew()
    expect(second.first).toBe(0)
    expect(collections).toBe(before)
    second.keep[0] = 9
    second.keep = new Uint8Array(0)
    await nextJob()
    // Two blocks out: a miss collects, and one of the dead blocks comes back.
    const third = firstByteOfNew()
    expect(collections).toBe(before + 1)
    expect([7, 9]).toContain(third.first)
  })

  it("an idle collection after dropped memory leaves it waiting for the next allocation", async () => {
    allocateAndDrop(11)
    allocateAndDrop(12)
    await nextJob()
    const before = collections
    recycleHostMemory(PLENTY)
    expect(collections).toBe(before + 1)
    const next = firstByteOfNew()
    expect(collections).toBe(before + 1)
    expect([11, 12]).toContain(next.first)
  })

  it("an idle collection runs only for at least 1 MiB dropped", () => {
    const before = collections
    recycleHostMemory(64 << 10)
    expect(collections).toBe(before)
  })

  it("one slow collection rules out collections for a second only", async () => {
    const dropped = 64 << 20
    slowCollectionMs = 80
    recycleHostMemory(PLENTY)
    slowCollectionMs = 0
    const before = collections
    // 80 ms is more than faulting in 64 MiB is assumed to cost (about 34 ms at 2 GB/s).
    recycleHostMemory(dropped)
    expect(collections).toBe(before)
    await new Promise((r) => setTimeout(r, 1100))
    recycleHostMemory(dropped)
    expect(collections).toBe(before + 1)
  })
})
