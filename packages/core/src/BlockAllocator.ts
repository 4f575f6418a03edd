/**
 * First-fit blocks over a range of offsets, coalesced on free: the bookkeeping of every memory pool
 * and heap (core's CPU pools, transport-nccl's pool segments, symmetric-mem's heaps). It holds no
 * memory, only offsets and sizes. Deterministic: allocators that make the same calls in the same
 * order hand out the same offsets, which is what lets symmetric heaps agree without exchanging them.
 */
import { ShapeError } from "./Errors.js"

export interface Block {
  readonly offset: number
  readonly size: number
}

export class BlockAllocator {
  /** Bytes of the blocks handed out (sizes rounded up to the alignment). */
  used = 0
  readonly alignment: number
  /** Free blocks sorted by offset, never adjacent (adjacent ones are merged). */
  private readonly freeList: Array<Block>
  private readonly sizes = new Map<number, number>()

  /** `alignment` (a power of two, default 256) is the unit of every block's offset and size. */
  constructor(
    readonly capacity: number,
    options: { readonly alignment?: number } = {},
  ) {
    this.alignment = options.alignment ?? 256
    if (!Number.isSafeInteger(this.alignment) || this.alignment < 1 || (this.alignment & (this.alignment - 1)) !== 0) {
      throw new ShapeError({ message: `a block alignment must be a power of two, got ${String(options.alignment)}` })
    }
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new ShapeError({ message: `a block range's capacity must be a non-negative integer, got ${capacity}` })
    this.freeList = capacity > 0 ? [{ offset: 0, size: capacity }] : []
  }

  get freeBytes(): number {
    return this.capacity - this.used
  }

  get largestFree(): number {
    return this.freeList.reduce((m, b) => Math.max(m, b.size), 0)
  }

  /**
   * A block of at least `byteLength` bytes (a multiple of the alignment, one unit for zero bytes so
   * that every block has an offset of its own), or undefined when no free block is large enough.
   * A range whose capacity is not aligned ends in a shorter block: it is handed out whole.
   */
  allocate(byteLength: number): Block | undefined {
    const wanted = Math.max(1, Math.ceil(byteLength / this.alignment)) * this.alignment
    const i = this.freeList.findIndex((b) => b.size >= Math.max(byteLength, 1))
    if (i < 0) return undefined
    const free = this.freeList[i]
    const size = Math.min(wanted, free.size)
    if (size === free.size) this.freeList.splice(i, 1)
    else this.freeList[i] = { offset: free.offset + size, size: free.size - size }
    this.used += size
    this.sizes.set(free.offset, size)
    return { offset: free.offset, size }
  }

  /** Returns the block at `offset` to the free list, merged with its free neighbours. */
  free(offset: number): void {
    const size = this.sizes.get(offset)
    if (size === undefined) throw new RangeError(`no block starts at offset ${offset}`)
    this.sizes.delete(offset)
    this.used -= size
    const list = this.freeList
    let i = 0
    while (i < list.length && list[i].offset < offset) i++
    let merged: Block = { offset, size }
    const next = list[i]
    if (next !== undefined && merged.offset + merged.size === next.offset) {
      merged = { offset, size: size + next.size }
      list.splice(i, 1)
    }
    const prev = list[i - 1]
    if (prev !== undefined && prev.offset + prev.size === merged.offset) list[i - 1] = { offset: prev.offset, size: prev.size + merged.size }
    else list.splice(i, 0, merged)
  }

  /** FNV-1a over the free list: equal for allocators in the same state (ranks compare it). */
  digest(): string {
    let h = 0x811c9dc5
    const mix = (n: number) => {
      for (const c of String(n)) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0
      h = Math.imul(h ^ 0x2c, 0x01000193) >>> 0
    }
    for (const b of this.freeList) {
      mix(b.offset)
      mix(b.size)
    }
    return `${this.used}:${this.freeList.length}:${h.toString(16)}`
  }
}
