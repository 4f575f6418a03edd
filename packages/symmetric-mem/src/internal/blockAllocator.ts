/**
 * First-fit blocks over an address range, coalesced on free. Deterministic: ranks that make the
 * same calls in the same order get the same offsets, which is what makes a heap symmetric without
 * exchanging offsets. `digest` summarizes the state so that ranks can check they still agree.
 */
export const ALIGNMENT = 256

interface Block {
  readonly offset: number
  readonly size: number
}

export class BlockAllocator {
  used = 0
  /** Free blocks sorted by offset, never adjacent. */
  private readonly freeList: Array<Block>
  private readonly sizes = new Map<number, number>()

  constructor(readonly capacity: number) {
    this.freeList = capacity > 0 ? [{ offset: 0, size: capacity }] : []
  }

  /** Size a request takes: a multiple of ALIGNMENT, at least one unit (zero-byte tensors get distinct offsets too). */
  static blockSize(byteLength: number): number {
    return Math.max(1, Math.ceil(byteLength / ALIGNMENT)) * ALIGNMENT
  }

  get largestFree(): number {
    return this.freeList.reduce((m, b) => Math.max(m, b.size), 0)
  }

  /** The offset of a block of `blockSize(byteLength)` bytes, or undefined when no free block is large enough. */
  allocate(byteLength: number): number | undefined {
    const size = BlockAllocator.blockSize(byteLength)
    const i = this.freeList.findIndex((b) => b.size >= size)
    if (i < 0) return undefined
    const free = this.freeList[i]
    if (free.size === size) this.freeList.splice(i, 1)
    else this.freeList[i] = { offset: free.offset + size, size: free.size - size }
    this.used += size
    this.sizes.set(free.offset, size)
    return free.offset
  }

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

  /** FNV-1a over the free list: equal on ranks whose allocators are in the same state. */
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
