/**
 * The producer's staging heap: a segment of this process (unlinked at once, kept open) where the
 * shm transport copies the tensors of an object that do not already lie in a mapped segment, so
 * that consumers can read them in place. Blocks go back when the object is released; the pages
 * stay warm for the next object.
 */
import { OutOfMemoryError, type Tensor } from "@tensorlane/core"
import { BlockAllocator } from "@tensorlane/core/plugin"
import { randomBytes } from "node:crypto"
import { loadAddon } from "../Loader.js"
import { reserve } from "./reservation.js"
import { SEGMENT_PREFIX, stagingBytes } from "./settings.js"

export const STAGING_KEY = "staging"

interface Heap {
  readonly allocator: BlockAllocator
  readonly memory: SharedArrayBuffer
}

let heap: Heap | undefined
const staged = new Map<string, Array<number>>()

const open = (): Heap => {
  if (heap !== undefined) return heap
  const addon = loadAddon()
  const capacity = stagingBytes()
  const name = `/${SEGMENT_PREFIX}staging-${process.pid}-${randomBytes(8).toString("hex")}`
  addon.createSegment(STAGING_KEY, name, capacity)
  addon.unlinkSegment(name)
  return (heap = { allocator: new BlockAllocator(capacity), memory: addon.segmentBuffer(STAGING_KEY)! })
}

/** Copies `tensor` (made contiguous) into a staging block held for `objectId`; its offset in the staging segment. */
export const stage = async (objectId: string, tensor: Tensor): Promise<number> => {
  const { allocator, memory } = open()
  const offset = allocator.allocate(tensor.nbytes)?.offset
  if (offset === undefined) {
    throw new OutOfMemoryError({
      message: `the shm transport's staging heap cannot hold ${tensor.nbytes} more bytes (${allocator.used} of ${allocator.capacity} in use; set TENSORLANE_SHM_STAGING_BYTES, or allocate the tensor on a symmetric heap)`,
      requested: tensor.nbytes,
      capacity: allocator.capacity,
    })
  }
  const blocks = staged.get(objectId) ?? []
  blocks.push(offset)
  staged.set(objectId, blocks)
  // On failure the caller unstages objectId, which gives the block back.
  reserve({ key: STAGING_KEY, offset, byteLength: tensor.nbytes, capacity: memory.byteLength, heap: "the shm transport's staging heap" })
  if (tensor.nbytes > 0) await loadAddon().copy(new Uint8Array(memory, offset, tensor.nbytes), tensor.contiguousBytes())
  return offset
}

export const unstage = (objectId: string): void => {
  const blocks = staged.get(objectId)
  if (blocks === undefined || heap === undefined) return
  staged.delete(objectId)
  for (const offset of blocks) heap.allocator.free(offset)
}

export const stagedObjects = (): ReadonlyArray<string> => [...staged.keys()]

export const closeStaging = (): void => {
  if (heap === undefined) return
  staged.clear()
  heap = undefined
  loadAddon().detachSegment(STAGING_KEY)
}
