/** The deterministic block allocator behind every symmetric heap and the staging heap. */
import { describe, expect, it } from "vitest"
import { ALIGNMENT, BlockAllocator } from "../src/internal/blockAllocator.ts"

describe("BlockAllocator", () => {
  it("first fit, aligned, coalescing on free", () => {
    const heap = new BlockAllocator(4 * ALIGNMENT)
    expect(heap.allocate(1)).toBe(0)
    expect(heap.allocate(ALIGNMENT + 1)).toBe(ALIGNMENT)
    expect(heap.allocate(0)).toBe(3 * ALIGNMENT)
    expect(heap.allocate(1)).toBeUndefined()
    heap.free(ALIGNMENT)
    heap.free(0)
    expect(heap.largestFree).toBe(3 * ALIGNMENT)
    expect(heap.allocate(3 * ALIGNMENT)).toBe(0)
    expect(() => heap.free(5)).toThrow(RangeError)
  })

  it("the same calls give the same offsets and digests; different histories give different digests", () => {
    const run = (sizes: ReadonlyArray<number>, frees: ReadonlyArray<number>) => {
      const heap = new BlockAllocator(1 << 20)
      const offsets = sizes.map((n) => heap.allocate(n)!)
      for (const i of frees) heap.free(offsets[i])
      return { offsets, digest: heap.digest() }
    }
    expect(run([100, 5000, 7], [1])).toEqual(run([100, 5000, 7], [1]))
    expect(run([100, 5000, 7], [1]).digest).not.toBe(run([100, 5000, 7], [0]).digest)
    expect(run([100, 5000], []).digest).not.toBe(run([100, 5001 + ALIGNMENT], []).digest)
  })
})
