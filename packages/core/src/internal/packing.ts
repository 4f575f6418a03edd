/**
 * The small host tensors of one value travel packed: copied, as the value is produced, into blocks
 * that move as single tensors, and received as views of those blocks. A tensor of its own costs a
 * storage at each end and its own part of every transfer and registration (tens of µs), and one of
 * the host cache does not recycle (below 1 MiB) fresh pages at each end besides: more than the copy.
 */
import type { Allocator, Storage } from "../Allocator.js"
import { cpuAllocator } from "../CpuMemory.js"
import { currentAllocator } from "../AllocatorScope.js"
import { DTypes, type DType } from "../DType.js"
import { ProtocolError } from "../Errors.js"
import { Tensor } from "../Tensor.js"
import { RECYCLE_MIN_BYTES } from "./hostMemoryCache.js"
import type { TensorMeta } from "./wireMetas.js"

/**
 * Tensors whose whole storage, in default host memory, is smaller than this are packed, when a value
 * has two or more of them: the storages the host cache leaves unrecycled. Views of a larger storage,
 * and pool or symmetric-heap memory, travel as they are: such memory is kept to be moved without a
 * copy or a registration per call (a weight registered once, a pool registered once).
 */
export const PACK_BELOW_BYTES = RECYCLE_MIN_BYTES

/** Each packed tensor starts at a multiple of this (above every itemSize), so that views of a block are aligned. */
const PACK_ALIGN = 64

/**
 * A block holds at most this many bytes (or one tensor, where larger): what a received view keeps
 * alive, and the copy one allocation takes, stay bounded however many small tensors a value holds.
 */
export const PACK_BLOCK_BYTES = 64 * 2 ** 20

/** Where the packed tensors lie in their blocks, and the blocks' sizes. */
export interface Packing {
  /** The value's tensors that travel in blocks, ascending. */
  readonly indices: ReadonlyArray<number>
  /** For each of them, its block and its offset there. */
  readonly blocks: ReadonlyArray<number>
  readonly offsets: ReadonlyArray<number>
  readonly blockBytes: ReadonlyArray<number>
}

const alignUp = (n: number): number => Math.ceil(n / PACK_ALIGN) * PACK_ALIGN

/**
 * The tensors of a value that travel packed, or undefined where fewer than two would: `registered`
 * (the transport's) says which storages it holds a registration of already.
 */
export const packable = (tensors: ReadonlyArray<Tensor>, registered?: (storage: Storage) => boolean): ReadonlyArray<number> | undefined => {
  const indices: Array<number> = []
  tensors.forEach((t, i) => {
    // nbytes too: a view with a zero stride can span more than its storage.
    const small = t.storage.allocator === cpuAllocator && t.storage.byteLength < PACK_BELOW_BYTES && t.nbytes < PACK_BELOW_BYTES
    if (small && registered?.(t.storage) !== true) indices.push(i)
  })
  return indices.length >= 2 ? indices : undefined
}

/** How the packed `indices` among `count` tensors travel: a byte per tensor, 1 where packed. */
export const packedMask = (indices: ReadonlyArray<number>, count: number): Uint8Array => {
  const mask = new Uint8Array(count)
  for (const i of indices) mask[i] = 1
  return mask
}

/** The packed tensors a peer's mask names, ascending; ProtocolError unless it has a byte, 0 or 1, per tensor. */
export const packedIndices = (mask: Uint8Array, count: number): Array<number> => {
  if (mask.byteLength !== count) throw new ProtocolError({ message: `the packed tensors' mask has ${mask.byteLength} bytes for ${count} tensors` })
  const indices: Array<number> = []
  mask.forEach((flag, i) => {
    if (flag === 1) indices.push(i)
    else if (flag !== 0) throw new ProtocolError({ message: `the packed tensors' mask holds ${flag} for tensor ${i} (0 or 1)` })
  })
  return indices
}

/**
 * The blocks' layout for the packed `indices` (ascending) of tensors described by `metas`, in
 * order, a new block where one would pass PACK_BLOCK_BYTES (both ends compute it alike). A peer's
 * are checked: host tensors below the limit.
 */
export const packingOf = (metas: ReadonlyArray<TensorMeta>, indices: ReadonlyArray<number>): Packing => {
  const [blocks, offsets, blockBytes] = [[] as Array<number>, [] as Array<number>, [] as Array<number>]
  let bytes = 0
  for (const i of indices) {
    const meta = metas[i]!
    if (meta.device !== "cpu" || meta.nbytes >= PACK_BELOW_BYTES) throw new ProtocolError({ message: `tensor ${i} (${meta.nbytes} bytes on ${meta.device}) cannot travel packed` })
    const at = alignUp(bytes)
    if (blockBytes.length === 0 || (at + meta.nbytes > PACK_BLOCK_BYTES && bytes > 0)) {
      if (blockBytes.length > 0) blockBytes[blockBytes.length - 1] = bytes
      blockBytes.push(0)
      bytes = 0
    } else bytes = at
    blocks.push(blockBytes.length - 1)
    offsets.push(bytes)
    bytes += meta.nbytes
  }
  if (blockBytes.length > 0) blockBytes[blockBytes.length - 1] = bytes
  return { indices, blocks, offsets, blockBytes }
}

/** The items (tensors, metas, targets) of the value's tensors that travel as themselves, in order. */
export const notPacked = <A>(items: ReadonlyArray<A>, packing: Packing): Array<A> => {
  const packed = new Set(packing.indices)
  return items.filter((_, i) => !packed.has(i))
}

const blockMeta = (bytes: number): TensorMeta => ({ dtype: "uint8", shape: [bytes], device: "cpu", nbytes: bytes })

/** What travels: the blocks first, then the tensors not packed, in order. */
export const travelMetas = (metas: ReadonlyArray<TensorMeta>, packing: Packing): Array<TensorMeta> => [
  ...packing.blockBytes.map(blockMeta),
  ...notPacked(metas, packing),
]

const blocksFrom = (allocator: Allocator, packing: Packing): Array<Tensor> =>
  packing.blockBytes.map((bytes) => Tensor.fromStorage(allocator.allocate(bytes), { dtype: "uint8", shape: [bytes] }))

/**
 * The producer's travelling tensors: new blocks holding a copy of the packed ones, then the rest. The
 * alignment gaps are zeroed: a block from the host cache holds what an earlier storage left there.
 */
export const packTensors = (tensors: ReadonlyArray<Tensor>, packing: Packing): Array<Tensor> => {
  const blocks = blocksFrom(cpuAllocator, packing)
  let end = 0
  packing.indices.forEach((index, k) => {
    const [bytes, offset, tensor] = [blocks[packing.blocks[k]!]!.storage.bytes, packing.offsets[k]!, tensors[index]!]
    // A new block's first tensor is at 0, before the last one's end: the range is empty.
    bytes.fill(0, end, offset)
    bytes.set(tensor.contiguousBytes(), offset)
    end = offset + tensor.nbytes
  })
  return [...blocks, ...notPacked(tensors, packing)]
}

/** Where a consumer receives the blocks: new ones, from the current host allocator. */
export const receivingBlocks = (packing: Packing): Array<Tensor> => blocksFrom(currentAllocator("cpu"), packing)

/**
 * The value's tensors from what travelled (the blocks first, then the rest): the packed ones are
 * views of their blocks, or, given `target`, copied into their targets.
 */
export const unpackTensors = (
  metas: ReadonlyArray<TensorMeta>,
  packing: Packing,
  travelled: ReadonlyArray<Tensor>,
  target: ReadonlyArray<Tensor> | undefined,
): Array<Tensor> => {
  const count = packing.blockBytes.length
  const rest = travelled.slice(count)
  const slot = new Map(packing.indices.map((index, k) => [index, k]))
  let next = 0
  return metas.map((meta, i) => {
    const k = slot.get(i)
    if (k === undefined) return rest[next++]!
    const [block, offset] = [travelled[packing.blocks[k]!]!.storage, packing.offsets[k]!]
    if (target !== undefined) {
      const into = target[i]!
      into.storage.bytes.set(block.bytes.subarray(offset, offset + meta.nbytes), into.byteOffset)
      return into
    }
    const dtype = meta.dtype as DType
    return Tensor.fromStorage(block, { dtype, shape: meta.shape, offset: offset / DTypes[dtype].itemSize })
  })
}
