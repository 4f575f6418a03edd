/**
 * The small host tensors of one value travel packed: copied, as the value is produced, into one block
 * that moves as a single tensor, and received as views of one block. A tensor of its own costs a
 * storage at each end and its own part of every transfer and registration (tens of µs), far more
 * than copying a few KiB.
 */
import { cpuAllocator } from "../CpuMemory.js"
import { currentAllocator } from "../AllocatorScope.js"
import { DTypes, type DType } from "../DType.js"
import { ProtocolError } from "../Errors.js"
import { Tensor } from "../Tensor.js"
import type { TensorMeta } from "./messages.js"

/**
 * Tensors whose whole storage, in default host memory, is at most this many bytes are packed, when a
 * value has two or more of them. Views of a larger storage, and pool or symmetric-heap memory, travel
 * as they are: such memory is kept to be moved without a copy or a registration per call (a weight
 * registered once, a pool registered once).
 */
export const PACK_TENSOR_LIMIT = 64 * 1024

/** Each packed tensor starts at a multiple of this (above every itemSize), so that views of the block are aligned. */
const PACK_ALIGN = 64

/** Where the packed tensors lie in their block, and its size. */
export interface Packing {
  /** The value's tensors that travel in the block, ascending. */
  readonly indices: ReadonlyArray<number>
  readonly offsets: ReadonlyArray<number>
  readonly bytes: number
}

const alignUp = (n: number): number => Math.ceil(n / PACK_ALIGN) * PACK_ALIGN

/** The tensors of a value that travel packed, or undefined where fewer than two would. */
export const packable = (tensors: ReadonlyArray<Tensor>): ReadonlyArray<number> | undefined => {
  const indices: Array<number> = []
  tensors.forEach((t, i) => {
    if (t.storage.allocator === cpuAllocator && t.storage.byteLength <= PACK_TENSOR_LIMIT) indices.push(i)
  })
  return indices.length >= 2 ? indices : undefined
}

/**
 * The block's layout for the packed `indices` of tensors described by `metas` (both ends compute it
 * alike). A peer's indices are checked: ascending, in range, host tensors within the limit.
 */
export const packingOf = (metas: ReadonlyArray<TensorMeta>, indices: ReadonlyArray<number>): Packing => {
  const offsets: Array<number> = []
  let bytes = 0
  let previous = -1
  for (const i of indices) {
    const meta = metas[i]
    if (!(i > previous) || meta === undefined) throw new ProtocolError({ message: `packed tensor indices must ascend within the object's ${metas.length} tensors, got [${indices.join(", ")}]` })
    if (meta.device !== "cpu" || meta.nbytes > PACK_TENSOR_LIMIT) throw new ProtocolError({ message: `tensor ${i} (${meta.nbytes} bytes on ${meta.device}) cannot travel packed` })
    previous = i
    bytes = alignUp(bytes)
    offsets.push(bytes)
    bytes += meta.nbytes
  }
  return { indices, offsets, bytes }
}

/** The items (tensors, metas, targets) of the value's tensors that travel as themselves, in order. */
export const notPacked = <A>(items: ReadonlyArray<A>, packing: Packing): Array<A> => {
  const packed = new Set(packing.indices)
  return items.filter((_, i) => !packed.has(i))
}

/** What travels: the block first, then the tensors not packed, in order. */
export const travelMetas = (metas: ReadonlyArray<TensorMeta>, packing: Packing): Array<TensorMeta> => [
  { dtype: "uint8", shape: [packing.bytes], device: "cpu", nbytes: packing.bytes },
  ...notPacked(metas, packing),
]

/** The producer's travelling tensors: a new block holding a copy of the packed ones, then the rest. */
export const packTensors = (tensors: ReadonlyArray<Tensor>, packing: Packing): Array<Tensor> => {
  const block = Tensor.fromStorage(cpuAllocator.allocate(packing.bytes), { dtype: "uint8", shape: [packing.bytes] })
  const bytes = block.storage.bytes
  packing.indices.forEach((index, k) => bytes.set(tensors[index]!.contiguousBytes(), packing.offsets[k]))
  return [block, ...notPacked(tensors, packing)]
}

/** Where a consumer receives: a new block (from the current host allocator), then the tensors not packed. */
export const receivingBlock = (packing: Packing): Tensor =>
  Tensor.fromStorage(currentAllocator("cpu").allocate(packing.bytes), { dtype: "uint8", shape: [packing.bytes] })

/**
 * The value's tensors from what travelled (`block` first, then the rest): the packed ones are views
 * of the block, or, given `target`, copied into their targets.
 */
export const unpackTensors = (
  metas: ReadonlyArray<TensorMeta>,
  packing: Packing,
  travelled: ReadonlyArray<Tensor>,
  target: ReadonlyArray<Tensor> | undefined,
): Array<Tensor> => {
  const [block, ...rest] = travelled
  const slot = new Map(packing.indices.map((index, k) => [index, k]))
  let next = 0
  return metas.map((meta, i) => {
    const k = slot.get(i)
    if (k === undefined) return rest[next++]!
    const offset = packing.offsets[k]!
    if (target !== undefined) {
      const into = target[i]!
      into.storage.bytes.set(block!.storage.bytes.subarray(offset, offset + meta.nbytes), into.byteOffset)
      return into
    }
    const dtype = meta.dtype as DType
    return Tensor.fromStorage(block!.storage, { dtype, shape: meta.shape, offset: offset / DTypes[dtype].itemSize })
  })
}
