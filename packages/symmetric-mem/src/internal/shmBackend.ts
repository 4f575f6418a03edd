/**
 * The `shm` backend: the heap of an shm group, which the shm transport mapped in this process when
 * the group was created (on the transfer agent's thread; the mapping is process-wide). Every rank
 * carves blocks out of its heap with the same deterministic allocator, so an allocation has the
 * same offset in every rank's heap and `peerTensor(t, r)` is the same offset in rank r's heap.
 */
import { type GroupMember, ObjectFreedError, OutOfMemoryError, type Storage } from "@tensorlane/core"
import { BlockAllocator, nextStorageId } from "@tensorlane/core/plugin"
import type { SymmetricBackend, SymmetricBlock } from "../Backend.js"
import { SymmetricBackendError } from "../Errors.js"
import { collectiveAllocator } from "./collectiveMemory.js"
import { loadAddon } from "../Loader.js"
import { reserveOnEveryRank } from "./reservation.js"
import { groupKey } from "./settings.js"

interface Heap {
  readonly token: string
  readonly memory: SharedArrayBuffer
  readonly capacity: number
  readonly allocator: BlockAllocator
}

const heaps = new Map<string, Heap>()

/** Storages of symmetric tensors name this allocator; allocation and free are collective calls, not its methods. */
const symmetricAllocator = collectiveAllocator("shm", "cpu")

/** How often heaps of destroyed groups are looked for while any heap is known. */
const SWEEP_MS = 1_000
let sweeper: ReturnType<typeof setInterval> | undefined

/**
 * Forgets the heaps of destroyed groups (the transfer agent, on its own thread, detached their
 * segments), since an entry keeps its whole heap mapped. This thread hears of no destroy, hence a
 * check at every lookup and, while heaps are known, on a slow timer that never keeps the process up.
 */
const forgetDestroyedHeaps = (): void => {
  const addon = loadAddon()
  for (const [name, heap] of heaps) {
    if (addon.segmentInfo(groupKey(name))?.token !== heap.token) heaps.delete(name)
  }
  if (heaps.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper)
    sweeper = undefined
  }
}

/** The heap this process mapped for the group, rebuilt when the group was created anew under the same name. */
const heapOf = (member: GroupMember): Heap => {
  forgetDestroyedHeaps()
  sweeper ??= setInterval(forgetDestroyedHeaps, SWEEP_MS).unref()
  const addon = loadAddon()
  const info = addon.segmentInfo(groupKey(member.name))
  if (info === undefined) {
    heaps.delete(member.name)
    throw new SymmetricBackendError({
      message: `group "${member.name}" (backend ${member.backend}) has no shm heap in this process: create the group with cluster.createCollectiveGroup(actors, { backend: "shm" })`,
      backend: "shm",
      reason: "wrong-group",
    })
  }
  const known = heaps.get(member.name)
  if (known !== undefined && known.token === info.token) return known
  const capacity = info.dataBytes / member.worldSize
  const heap: Heap = { token: info.token, memory: addon.segmentBuffer(groupKey(member.name))!, capacity, allocator: new BlockAllocator(capacity) }
  heaps.set(member.name, heap)
  return heap
}

class HeapStorage implements Storage {
  readonly id = nextStorageId()
  readonly device = "cpu" as const
  readonly handle = undefined
  readonly allocator = symmetricAllocator
  private readonly view: Uint8Array

  constructor(memory: SharedArrayBuffer, offset: number, readonly byteLength: number, private readonly isFreed: () => boolean, private readonly label: string) {
    this.view = new Uint8Array(memory, offset, byteLength)
  }

  get bytes(): Uint8Array {
    if (this.isFreed()) throw new ObjectFreedError({ message: `${this.label} was freed with freeSymmetric`, objectId: `storage:${this.id}` })
    return this.view
  }
}

export const shmBackend: SymmetricBackend = {
  name: "shm",
  heapId: (member) => heapOf(member).token,
  digest: (member) => heapOf(member).allocator.digest(),
  allocate: async (member, byteLength, gather) => {
    const heap = heapOf(member)
    const offset = heap.allocator.allocate(byteLength)?.offset
    if (offset === undefined) {
      throw new OutOfMemoryError({
        message: `the shm heap of group "${member.name}" cannot hold ${byteLength} more bytes: ${heap.allocator.used} of ${heap.capacity} in use, largest free block ${heap.allocator.largestFree} (set TENSORLANE_SHM_HEAP_BYTES before creating the group)`,
        requested: byteLength,
        capacity: heap.capacity,
      })
    }
    const block: SymmetricBlock = {
      device: "cpu",
      storage: (rank, n, isFreed) => new HeapStorage(heap.memory, rank * heap.capacity + offset, n, isFreed, `symmetric block at ${offset} of group "${member.name}" (rank ${rank}'s copy)`),
      free: () => heap.allocator.free(offset),
    }
    const reservation = { key: groupKey(member.name), offset: member.rank * heap.capacity + offset, byteLength, capacity: heap.capacity, heap: `the shm heap of group "${member.name}"` }
    await reserveOnEveryRank(member, gather, reservation, block.free)
    return block
  },
}
