import { describe, expect, it } from "vitest"
import { BlockAllocator } from "../src/BlockAllocator.js"
import { ShapeError } from "../src/Errors.js"

describe("BlockAllocator", () => {
  it("hands out aligned blocks first fit, one unit for zero bytes, and undefined when full", () => {
    const range = new BlockAllocator(4 * 256)
    expect(range.allocate(1)).toEqual({ offset: 0, size: 256 })
    expect(range.allocate(257)).toEqual({ offset: 256, size: 512 })
    expect(range.allocate(0)).toEqual({ offset: 768, size: 256 })
    expect(range.used).toBe(1024)
    expect(range.freeBytes).toBe(0)
    expect(range.allocate(1)).toBeUndefined()
  })

  it("coalesces freed neighbours, so that a larger block fits again; unknown offsets are refused", () => {
    const range = new BlockAllocator(4 * 64, { alignment: 64 })
    const blocks = [0, 1, 2, 3].map(() => range.allocate(64)!.offset)
    range.free(blocks[1])
    range.free(blocks[2])
    expect(range.largestFree).toBe(128)
    expect(range.allocate(129)).toBeUndefined()
    range.free(blocks[0])
    expect(range.largestFree).toBe(192)
    expect(range.allocate(192)).toEqual({ offset: 0, size: 192 })
    range.free(0)
    range.free(blocks[3])
    expect(range.largestFree).toBe(256)
    expect(range.used).toBe(0)
    expect(() => range.free(5)).toThrow(RangeError)
    expect(() => range.free(0)).toThrow(RangeError)
  })

  it("hands out the short tail of an unaligned range whole", () => {
    const range = new BlockAllocator(100, { alignment: 64 })
    expect(range.allocate(10)).toEqual({ offset: 0, size: 64 })
    expect(range.allocate(37)).toBeUndefined()
    expect(range.allocate(36)).toEqual({ offset: 64, size: 36 })
  })

  it("is deterministic: the same calls give the same offsets and digests, other histories other digests", () => {
    const run = (sizes: ReadonlyArray<number>, frees: ReadonlyArray<number>) => {
      const range = new BlockAllocator(1 << 20)
      const offsets = sizes.map((n) => range.allocate(n)!.offset)
      for (const i of frees) range.free(offsets[i])
      return { offsets, digest: range.digest() }
    }
    expect(run([100, 5000, 7], [1])).toEqual(run([100, 5000, 7], [1]))
    expect(run([100, 5000, 7], [1]).digest).not.toBe(run([100, 5000, 7], [0]).digest)
    expect(run([100, 5000], []).digest).not.toBe(run([100, 5001 + 256], []).digest)
  })

  it("refuses an alignment that is not a power of two and a bad capacity", () => {
    for (const alignment of [0, 3, 12, 7.5, -8]) expect(() => new BlockAllocator(64, { alignment })).toThrow(ShapeError)
    expect(() => new BlockAllocator(-1)).toThrow(ShapeError)
  })
})
