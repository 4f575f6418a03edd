/**
 * How many blocks of a size the host-memory cache lets circulate: as many as its capacity holds (up
 * to 8), so that a loop of blocks a quarter of the cache comes to collect every third call, not
 * after every call. A cache of its own, with a small capacity; collections are counted.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"

const MiB = 1 << 20
const realGc = (() => {
  // vitest workers run without --expose-gc; V8 lets the flag be turned on at run time.
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc") as () => void
})()
let collections = 0
const nextJob = () => new Promise((resolve) => setImmediate(resolve))

let allocator: typeof import("../src/CpuMemory.js")

beforeAll(async () => {
  ;(globalThis as { gc?: () => void }).gc = () => {
    collections++
    realGc()
  }
  // Room for four blocks of the test's size.
  vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", String(16 * MiB))
  vi.resetModules()
  allocator = await import("../src/CpuMemory.js")
})

afterAll(() => {
  delete (globalThis as { gc?: () => void }).gc
  vi.unstubAllEnvs()
})

describe("host memory cache allowance", () => {
  it("lets as many blocks of a size circulate as the whole cache holds", async () => {
    const bytes = 4 * MiB
    const held: Array<Uint8Array> = []
    // Each round: the size's allowance out and none idle, so an idle collection runs and raises it.
    for (let round = 0; round < 2; round++) {
      for (let i = held.length; i < 2 + round; i++) allocator.cpuAllocator.allocate(bytes).bytes[0] = 1
      await nextJob()
      const before = collections
      allocator.recycleHostMemory(1 << 30)
      expect(collections).toBe(before + 1)
      // What the collection recycled comes back warm; hold it, so that every block is out again.
      while (held.length < 2 + round) held.push(allocator.cpuAllocator.allocate(bytes).bytes)
      expect(held.every((b) => b[0] === 1)).toBe(true)
    }
    // Three blocks out and an allowance of four: the size is not running out, nothing to collect.
    const before = collections
    allocator.recycleHostMemory(1 << 30)
    expect(collections).toBe(before)
    expect(held).toHaveLength(3)
  })
})
