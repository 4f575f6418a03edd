/**
 * Host memory the cache cannot recycle, bounded all the same: a loop that never yields keeps every
 * block it took alive until its job ends (a WeakRef made in a job holds its target until then), so
 * past the cache's capacity in one job blocks go out untracked; those and the storages too small to
 * recycle are SharedArrayBuffers, whose memory V8 counts towards no collection of its own, so the
 * cache collects once they pile up. A cache of its own, with a small capacity; storages are never
 * written, so the figures are `process.memoryUsage().arrayBuffers`, not resident memory.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { countedGc, exposedGc, onCollectionClock } from "./helpers/gc.ts"

const MiB = 1 << 20
const CAPACITY = 16 * MiB

const collections = countedGc()
let allocator: typeof import("../src/CpuMemory.js")

beforeAll(async () => {
  vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", String(CAPACITY))
  vi.resetModules()
  allocator = await import("../src/CpuMemory.js")
})

afterAll(() => {
  vi.unstubAllEnvs()
})

const nextJob = () => new Promise((resolve) => setImmediate(resolve))
/** The earlier tests' garbage collected and swept, the job over. */
const settled = async (): Promise<void> => {
  exposedGc()
  await nextJob()
  await new Promise((resolve) => setTimeout(resolve, 50))
}
const arrayBuffers = () => process.memoryUsage().arrayBuffers

/**
 * The most ArrayBuffer memory seen while `count` storages of `bytes` are allocated and dropped in one
 * job; each collection taking 1 ms, so that a slow one (which lets the next wait for more) plays no part.
 */
const peakOfLoop = async (bytes: number, count: number): Promise<number> => {
  let peak = 0
  await onCollectionClock(collections, 1, () => {
    for (let i = 0; i < count; i++) {
      allocator.cpuAllocator.allocate(bytes)
      peak = Math.max(peak, arrayBuffers())
    }
  })
  return peak
}

describe("host memory the cache does not recycle", () => {
  it("bounds a loop that never yields to the cache's capacity and a collection's worth of untracked blocks", async () => {
    await settled()
    const before = arrayBuffers()
    const counted = collections.count
    // 512 MiB of 1 MiB blocks in one job: tracked by a WeakRef each, they would all live until it ends.
    const peak = await peakOfLoop(MiB, 512)
    expect(collections.count).toBeGreaterThan(counted)
    expect(peak - before).toBeLessThan(224 * MiB)
    await nextJob()
  })

  it("collects storages too small to recycle once their memory piles up", async () => {
    await settled()
    const before = arrayBuffers()
    const counted = collections.count
    const peak = await peakOfLoop(256 << 10, 2048)
    expect(collections.count).toBeGreaterThan(counted)
    expect(peak - before).toBeLessThan(224 * MiB)
  })

  it("collects where something else frees only some of them as they go", async () => {
    await settled()
    const [before, counted] = [arrayBuffers(), collections.count]
    let peak = 0
    // Of 1 GiB of small storages, two in five outlive the collections standing in for V8's scavenges
    // (each 8 MiB): only a full collection of the cache's own frees those (the test drops them then).
    let outliving: Array<unknown> = []
    let seen = collections.count
    await onCollectionClock(collections, 1, () => {
      for (let i = 0; i < 4096; i++) {
        if (collections.count !== seen) [seen, outliving] = [collections.count, []]
        const storage = allocator.cpuAllocator.allocate(256 << 10)
        if (i % 5 < 2) outliving.push(storage)
        if (i % 32 === 31) exposedGc()
        peak = Math.max(peak, arrayBuffers())
      }
    })
    expect(collections.count).toBeGreaterThan(counted)
    expect(peak - before).toBeLessThan(224 * MiB)
  })

  it("collects nothing of its own where something else frees them as they go", async () => {
    await settled()
    const counted = collections.count
    // 512 MiB of small storages, each 8 MiB of them dropped and collected by another collection (as
    // V8's scavenges do in a loop making plenty of other garbage): the memory never grows by 32 MiB.
    for (let i = 0; i < 2048; i++) {
      allocator.cpuAllocator.allocate(256 << 10)
      if (i % 32 === 31) exposedGc()
    }
    expect(collections.count).toBe(counted)
  })

  it("looks at the memory a program holds only as often as a collection's time would fault in", async () => {
    // 512 MiB held in small storages: every other look collects, for nothing; a collection of 100 ms
    // (as a large heap's) spaces the looks 200 MB apart instead of 64 MiB.
    const heldFor = async (collectionMs: number): Promise<number> => {
      await settled()
      const counted = collections.count
      await onCollectionClock(collections, collectionMs, () => {
        const held = Array.from({ length: 2048 }, () => allocator.cpuAllocator.allocate(256 << 10))
        expect(held).toHaveLength(2048)
      })
      return collections.count - counted
    }
    expect(await heldFor(1)).toBeGreaterThanOrEqual(3)
    expect(await heldFor(100)).toBeLessThanOrEqual(2)
  })
})
