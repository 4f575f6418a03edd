/**
 * The host-memory cache when a program moves from one large size to another: idle blocks of the size
 * it left are let go, oldest first, so that the new size's blocks stay recycled instead of being dropped
 * (and faulted in afresh) for want of room. A cache of its own, with a small capacity.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { exposedGc as gc } from "./helpers/gc.ts"

const MiB = 1 << 20
const nextJob = () => new Promise((resolve) => setImmediate(resolve))

let allocator: typeof import("../src/CpuMemory.js")

beforeAll(async () => {
  ;(globalThis as { gc?: () => void }).gc = gc
  // Room for three blocks of the first size, or two of the second.
  vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", String(12 * MiB))
  vi.resetModules()
  allocator = await import("../src/CpuMemory.js")
})

afterAll(() => {
  delete (globalThis as { gc?: () => void }).gc
  vi.unstubAllEnvs()
})

/** Two storages of `bytes` marked with `markers`, dropped, then proven dead by an idle collection. */
const cycleTwo = async (bytes: number, markers: [number, number]): Promise<void> => {
  for (const marker of markers) allocator.cpuAllocator.allocate(bytes).bytes[0] = marker
  await nextJob()
  allocator.recycleHostMemory(1 << 30)
}

describe("host memory cache capacity", () => {
  it("lets the idle blocks of a size no longer asked for go before it drops a block of the size in use", async () => {
    await cycleTwo(4 * MiB, [1, 2])
    // 8 MiB idle of the first size; two 6 MiB blocks fit only once both of those are let go.
    await cycleTwo(6 * MiB, [3, 4])
    const firsts = [allocator.cpuAllocator.allocate(6 * MiB).bytes[0], allocator.cpuAllocator.allocate(6 * MiB).bytes[0]]
    expect(firsts.sort()).toEqual([3, 4])
    // The first size's blocks are gone: fresh (zeroed) memory.
    expect(allocator.cpuAllocator.allocate(4 * MiB).bytes[0]).toBe(0)
  })
})
