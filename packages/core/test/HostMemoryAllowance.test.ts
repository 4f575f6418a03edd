/**
 * How many blocks of a size the host-memory cache lets circulate, and how fast that grows: small
 * blocks double up to 128 MiB of them (shared by the sizes in use past 16 blocks each), large ones add
 * one up to 16, or up to 16 calls' worth where a call holds several, never more than the cache holds,
 * so that a loop of results collects once per allowance rather than after every call. A fresh cache of 256 MiB for each test (1 GiB where said);
 * collections are counted. Where a test collects on the spot, each collection takes 8 ms of a clock
 * of its own: the cache weighs a collection's time against page faults, and a worker's real
 * collections on a loaded machine (40 ms) turned those off.
 */
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest"
import { countedGc, exposedGc, onCollectionClock } from "./helpers/gc.ts"

const MiB = 1 << 20
const collections = countedGc()
const nextJob = () => new Promise((resolve) => setImmediate(resolve))

let allocator: typeof import("../src/CpuMemory.js")

/** A fresh cache of `bytes` (the capacity is read as the cache is made). */
const freshCache = async (bytes: number) => {
  vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", String(bytes))
  vi.resetModules()
  allocator = await import("../src/CpuMemory.js")
  // What an earlier test dropped must not count as this cache's blocks (it has none yet).
  exposedGc()
}

beforeEach(() => freshCache(256 * MiB))

afterAll(() => {
  vi.unstubAllEnvs()
})

describe("host memory cache allowance", () => {
  const expectNoCollection = async () => {
    await nextJob()
    const before = collections.count
    allocator.recycleHostMemory(1 << 30)
    expect(collections.count).toBe(before)
  }

  /**
   * Takes blocks `from` up to `to` of a round (below, `keep` of all are kept, and the last `perCall`
   * of the round held): how many came back warm. A function of its own, so that no dropped block
   * stays in a register of the test's async frame across its awaits.
   */
  const takeBlocks = (bytes: number, from: number, to: number, out: number, kept: Array<Uint8Array>, held: Array<Uint8Array>, keep: number, perCall: number) => {
    let warm = 0
    for (let i = from; i < to; i++) {
      const block = allocator.cpuAllocator.allocate(bytes).bytes
      if (block[0] === 1) warm++
      block[0] = 1
      if (kept.length < keep) kept.push(block)
      else if (i >= out - perCall) held.push(block)
    }
    return warm
  }

  /**
   * Runs a round per allowance, the first of 2 blocks, then one per expected allowance (a repeated
   * last value: it stays): a loop of results takes the size's allowance (those the last collection
   * recycled come back warm, the rest fresh), the last `perCall` of them held while the round's
   * collection runs (a call's own blocks, dropped after it), the first `keep` of all kept throughout
   * (a model's weights), the others dropped at once. The round's last block, and none before it,
   * makes the size run out: its idle collection runs (and raises the allowance for the next round).
   * Returns how many blocks of each round came back warm.
   */
  const climb = async (bytes: number, allowances: ReadonlyArray<number>, { perCall = 0, keep = 0 } = {}) => {
    const kept: Array<Uint8Array> = []
    const recycled: Array<number> = []
    let carried = 0
    for (const out of [2, ...allowances]) {
      const held: Array<Uint8Array> = []
      // The last round's held blocks are out still, dropped but not proven dead.
      const first = kept.length + carried
      const atStart = collections.count
      let warm = takeBlocks(bytes, first, out - 1, out, kept, held, keep, perCall)
      // One block short of its allowance, the size is not running out yet.
      await expectNoCollection()
      warm += takeBlocks(bytes, Math.max(first, out - 1), out, out, kept, held, keep, perCall)
      recycled.push(warm)
      await nextJob()
      // The round's takes collected nothing on the spot: they stayed within the allowance.
      expect(collections.count).toBe(atStart)
      allocator.recycleHostMemory(1 << 30)
      expect(collections.count).toBe(atStart + 1)
      // The blocks held through the collection are the program's still.
      expect([...kept, ...held].every((b) => b[0] === 1)).toBe(true)
      carried = held.length
    }
    return recycled
  }

  it("doubles the blocks of a small size that circulate, up to 128 MiB of them", async () => {
    const recycled = await climb(MiB, [4, 8, 16, 32, 64, 128, 128])
    // Each round got the blocks of the one before back warm.
    expect(recycled).toEqual([0, 2, 4, 8, 16, 32, 64, 128])
  })

  it("lets a call that holds many blocks of a size have 16 calls' worth out", async () => {
    // Each collection finds 8 blocks of 2 MiB held that were handed out since the one before: 128
    // blocks (256 MiB, the whole cache), where a call of one would stop at 64 (128 MiB).
    await climb(2 * MiB, [4, 8, 16, 32, 64, 128, 128], { perCall: 8 })
    await freshCache(256 * MiB)
    await climb(2 * MiB, [4, 8, 16, 32, 64, 64], { perCall: 1 })
  })

  it("shares the cache between sizes whose calls hold many blocks, in proportion to what their calls hold", async () => {
    await climb(2 * MiB, [4, 8, 16, 32, 64, 128, 128], { perCall: 8 })
    // Calls hold 32 MiB of 4 MiB blocks; 2 MiB, no longer taken since (its collections find none of
    // it handed out), weighs one block, 2 MiB: 4 MiB gets 32/34 of the cache of 256 MiB, 60 blocks,
    // not the 64 the cache holds of it alone.
    await climb(4 * MiB, [4, 8, 16, 32, 60, 60], { perCall: 8 })
  })

  it("counts as a call's the blocks held since the collection before, not those kept longer", async () => {
    // 8 blocks of 2 MiB taken in the first rounds and kept: held at every collection, but not handed
    // out since the one before, from the fourth on. Counted as a call's, they would lift it to 128.
    await climb(2 * MiB, [4, 8, 16, 32, 64, 64], { keep: 8 })
  })

  it("lets the sizes in use share the 128 MiB past 16 blocks each", async () => {
    await climb(MiB, [4, 8, 16, 32, 64, 128, 128])
    // 1 MiB holds 112 MiB past its 16 blocks: 2 MiB stops at 16 (it alone would reach 64).
    await climb(2 * MiB, [4, 8, 16, 16])
  })

  it("takes the share back from a size no longer allocated", async () => {
    await climb(MiB, [4, 8, 16, 32, 64, 128])
    // Over 1024 allocations since 1 MiB's last, of a size that claims no share (8 blocks of 32 MiB
    // fill a cache of 256 MiB): 1 MiB no longer holds its share, and 4 MiB climbs to 32 blocks.
    for (let i = 0; i < 1100; i++) allocator.cpuAllocator.allocate(32 * MiB)
    await nextJob()
    allocator.recycleHostMemory(1 << 30)
    await climb(4 * MiB, [4, 8, 16, 32, 32])
  })

  it("adds one block of a large size at a time, up to what the whole cache holds", async () => {
    // Eight blocks of 32 MiB fill the cache of 256 MiB.
    await climb(32 * MiB, [3, 4, 5, 6, 7, 8, 8])
    // Two blocks of 128 MiB fill the cache of 256 MiB: they stay at 2.
    await climb(128 * MiB, [2, 2, 2])
  })

  /** A loop of results of `bytes`, each dropped at once, an idle moment reported after each where `idle`: its collections. */
  const resultLoop = async (bytes: number, calls: number, idle: boolean) => {
    const before = collections.count
    for (let i = 0; i < calls; i++) {
      allocator.cpuAllocator.allocate(bytes).bytes[0] = 1
      await nextJob()
      if (idle) allocator.recycleHostMemory(1 << 30)
    }
    return collections.count - before
  }

  it("lets 16 blocks of a large size circulate where the cache holds them", async () => {
    await freshCache(1 << 30)
    // Once its allowance has climbed, one collection per 16 calls.
    await resultLoop(32 * MiB, 256, true)
    expect(await resultLoop(32 * MiB, 64, true)).toBe(4)
  })

  it("raises the allowance after a collection on the spot, as after an idle one", async () => {
    await freshCache(1 << 30)
    await onCollectionClock(collections, 8, async () => {
      // A driver receiving results: no idle moment ever collecting. Eight blocks of 128 MiB fill the
      // cache of 1 GiB; a collection on the spot pays at up to 67 ms (a fresh block's page faults at
      // 2 GB/s). The climb from 2 to 8 blocks out takes 2 + 3 + ... + 8 calls; then one collection per
      // 8 calls.
      await resultLoop(128 * MiB, 48, false)
      expect(await resultLoop(128 * MiB, 56, false)).toBeLessThanOrEqual(9)
    })
  })

  /** A loop of `calls` results of `bytes`, each dropped: how many came in recycled memory. */
  const recycledIn = async (bytes: number, calls: number) => {
    let recycled = 0
    for (let i = 0; i < calls; i++) {
      const block = allocator.cpuAllocator.allocate(bytes).bytes
      if (block[0] === 1) recycled++
      block[0] = 1
      await nextJob()
    }
    return recycled
  }

  it("collects on the spot, without idle moments, once the blocks out would pay for it where one block would not", async () => {
    // A driver whose own heap makes each collection take 8 ms: more than one 4 MiB block's page
    // faults (2.1 ms at 2 GB/s), less than those of the four blocks out it then waits for.
    await onCollectionClock(collections, 8, async () => {
      await resultLoop(4 * MiB, 200, false)
      const before = collections.count
      // Its allowance climbed to 32 blocks: one collection per 32 results, each recycled.
      expect(await recycledIn(4 * MiB, 100)).toBe(100)
      expect(collections.count - before).toBeLessThanOrEqual(4)
    })
  })

  it("weighs a collection on the spot against one block where idle moments come", async () => {
    // An actor: its collections on the spot mean frees lagging behind, and more of them measured
    // worse. Once one took 8 ms, no 4 MiB block pays for another.
    allocator.recycleHostMemory(0)
    await onCollectionClock(collections, 8, async () => {
      await resultLoop(4 * MiB, 8, false)
      const before = collections.count
      await recycledIn(4 * MiB, 100)
      expect(collections.count).toBe(before)
    })
  })

  it("recycles a block larger than the cache through a collection on the spot", async () => {
    await freshCache(32 * MiB)
    await onCollectionClock(collections, 8, async () => {
      // Never kept idle (the cache holds 32 MiB), but handed out again as a collection finds it dead.
      await resultLoop(64 * MiB, 4, false)
      expect(allocator.cpuAllocator.allocate(64 * MiB).bytes[0]).toBe(1)
    })
  })

  it("pauses collections on the spot for a size the program keeps", async () => {
    await freshCache(1 << 30)
    // A program keeping every result: a collection finds none of them dead, and the next waits for an
    // allowance's worth of allocations instead of coming at each one, the one after twice as long
    // (five collections in 48 allocations; eight with pauses of one allowance each).
    const kept: Array<Uint8Array> = []
    const before = collections.count
    for (let i = 0; i < 48; i++) {
      kept.push(allocator.cpuAllocator.allocate(64 * MiB).bytes)
      await nextJob()
    }
    expect(kept).toHaveLength(48)
    expect(collections.count - before).toBeLessThanOrEqual(6)
  })

  it("pauses them for a cache's worth of allocations at most", async () => {
    await freshCache(32 * MiB)
    await onCollectionClock(collections, 8, async () => {
      // A program keeping 300 results of 1 MiB, its pauses doubling each time, then dropping them all:
      // the fresh blocks of a pause wait for the next collection (V8 counts no SharedArrayBuffer's memory
      // towards its own), so a pause takes at most 32 of them before one recycles the rest.
      const kept: Array<Uint8Array> = []
      for (let i = 0; i < 300; i++) {
        kept.push(allocator.cpuAllocator.allocate(MiB).bytes)
        kept[i][0] = 1
        await nextJob()
      }
      kept.length = 0
      expect(100 - (await recycledIn(MiB, 100))).toBeLessThanOrEqual(33)
    })
  })

  it("ends that pause once the process drops memory", async () => {
    await freshCache(1 << 30)
    await onCollectionClock(collections, 8, async () => {
      // The third block's collection finds the first two held, and pauses.
      const kept = [0, 1, 2].map(() => allocator.cpuAllocator.allocate(64 * MiB).bytes)
      for (const bytes of kept) bytes[0] = 1
      kept.length = 0
      await nextJob()
      // A drop too small to collect for: the next miss collects on the spot and finds a dropped block.
      allocator.recycleHostMemory(1)
      expect(allocator.cpuAllocator.allocate(64 * MiB).bytes[0]).toBe(1)
    })
  })

  it("collects nothing while every size has fewer blocks out than its allowance", async () => {
    // Two of its allowance of four blocks out, none idle.
    await climb(3 * MiB, [])
    await resultLoop(3 * MiB, 2, false)
    const before = collections.count
    allocator.recycleHostMemory(1 << 30)
    expect(collections.count).toBe(before)
  })
})
