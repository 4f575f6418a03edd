/**
 * Host memory: the default CPU allocator (one SharedArrayBuffer per storage, so that worker threads
 * can read and write it; large ones recycled by the host memory cache) and fixed-capacity CPU memory
 * pools.
 */
import { constants } from "node:buffer"
import { totalmem } from "node:os"
import type { Allocator, MemoryPool, Storage } from "./Allocator.js"
import { type Block, BlockAllocator } from "./BlockAllocator.js"
import { ObjectFreedError, OutOfMemoryError, ShapeError, UnsupportedOperationError } from "./Errors.js"
import { nextStorageId } from "./internal/allocatorState.js"
import { forceGc, hostMemory } from "./internal/hostMemoryCache.js"
import { currentJob } from "./internal/job.js"
import { checkIndex } from "./internal/layout.js"

export { hostMemoryWarmCalls, recycleHostMemory } from "./internal/hostMemoryCache.js"

class HostStorage implements Storage {
  readonly id = nextStorageId()
  readonly device = "cpu" as const
  readonly handle = undefined
  readonly byteLength: number
  freed = false

  constructor(
    readonly allocator: Allocator,
    private readonly view: Uint8Array,
    /** Pool blocks are handed out again after free, so their bytes must not stay reachable. */
    private readonly reusable: boolean,
  ) {
    this.byteLength = view.byteLength
  }

  get bytes(): Uint8Array {
    if (this.freed && this.reusable) {
      throw new ObjectFreedError({
        message: `storage ${this.id} was freed back to allocator "${this.allocator.name}"`,
        objectId: `storage:${this.id}`,
      })
    }
    return this.view
  }
}

const checkOwner = (allocator: Allocator, storage: Storage): HostStorage => {
  if (storage.allocator !== allocator || !(storage instanceof HostStorage)) {
    throw new UnsupportedOperationError({
      message: `storage ${storage.id} belongs to allocator "${storage.allocator.name}", not "${allocator.name}"`,
    })
  }
  return storage
}

/** The process could not have `requested` bytes of host memory (what: what they were for). */
const hostMemoryRefused = (what: string, requested: number, cause: unknown): OutOfMemoryError =>
  new OutOfMemoryError({
    message: `cannot allocate ${what}: ${cause instanceof Error ? cause.message : String(cause)}`,
    requested,
    capacity: totalmem(),
  })

/**
 * The most bytes one typed array may view on this Node (`buffer.constants.MAX_LENGTH`): 4 GiB on
 * Node 20, 2^53 - 1 from Node 22. A storage is viewed by one Uint8Array, so no storage is larger.
 */
const MOST_VIEWED_BYTES = constants.MAX_LENGTH

/** OutOfMemoryError for `what` of `requested` bytes past MOST_VIEWED_BYTES. */
const requireOneView = (what: string, requested: number): void => {
  if (requested <= MOST_VIEWED_BYTES) return
  throw new OutOfMemoryError({
    message: `cannot allocate ${what}: this Node (${process.version}) views at most ${MOST_VIEWED_BYTES} bytes in one typed array; Node 22 or later views more`,
    requested,
    capacity: MOST_VIEWED_BYTES,
  })
}

/** The default allocator: one SharedArrayBuffer per storage; large ones recycled after garbage collection. */
export const cpuAllocator: Allocator = {
  name: "cpu",
  device: "cpu",
  allocate(byteLength) {
    const n = checkIndex(byteLength, "byteLength")
    requireOneView(`${n} bytes of host memory`, n)
    let buffer: SharedArrayBuffer
    try {
      buffer = hostMemory.take(n)
    } catch (e) {
      throw hostMemoryRefused(`${n} bytes of host memory`, n, e)
    }
    return new HostStorage(cpuAllocator, new Uint8Array(buffer), false)
  },
  free(storage) {
    checkOwner(cpuAllocator, storage).freed = true
  },
}

export interface CpuMemoryPoolOptions {
  /** Total bytes of the pool's single SharedArrayBuffer. */
  readonly capacity: number
  /** Block offsets and sizes are multiples of this power of two (at least 8, the largest itemSize). */
  readonly alignment?: number
  readonly name?: string
}

class PoolStorage extends HostStorage {
  constructor(allocator: Allocator, view: Uint8Array, readonly block: Block | undefined) {
    super(allocator, view, true)
  }
}

class CpuMemoryPool implements MemoryPool {
  readonly device = "cpu" as const
  readonly name: string
  readonly capacity: number
  readonly alignment: number
  private readonly buffer: SharedArrayBuffer
  private readonly blocks: BlockAllocator
  /**
   * The storage of each block out, weakly: a block whose storage was collected without `free` goes
   * back to the pool. The registry does so some time after the collection; an allocation that would
   * fail collects and looks at once (a freed object's tensors may be held by nothing but garbage).
   */
  private readonly out = new Map<Block, { readonly storage: WeakRef<PoolStorage>; readonly job: number }>()
  // Holds only the block, never the storage, so an unreachable storage can be collected.
  private readonly registry = new FinalizationRegistry<Block>((block) => this.release(block))
  private closed = false

  constructor(options: CpuMemoryPoolOptions) {
    this.name = options.name ?? "cpu-pool"
    this.capacity = checkIndex(options.capacity, `capacity of memory pool "${this.name}"`)
    // Its region is one view of all of it.
    requireOneView(`memory pool "${this.name}" of ${this.capacity} bytes`, this.capacity)
    this.alignment = options.alignment ?? 64
    if (!Number.isSafeInteger(this.alignment) || this.alignment < 8 || (this.alignment & (this.alignment - 1)) !== 0) {
      throw new ShapeError({
        message: `alignment of memory pool "${this.name}" must be a power of two >= 8, got ${String(options.alignment)}`,
      })
    }
    try {
      this.buffer = new SharedArrayBuffer(this.capacity)
    } catch (e) {
      throw hostMemoryRefused(`memory pool "${this.name}" of ${this.capacity} bytes`, this.capacity, e)
    }
    this.blocks = new BlockAllocator(this.capacity, { alignment: this.alignment })
  }

  get used(): number {
    return this.blocks.used
  }

  get freeBytes(): number {
    return this.blocks.freeBytes
  }

  get region(): Uint8Array {
    return new Uint8Array(this.buffer)
  }

  allocate(byteLength: number): Storage {
    if (this.closed) throw new UnsupportedOperationError({ message: `memory pool "${this.name}" is closed` })
    const n = checkIndex(byteLength, "byteLength")
    if (n === 0) return new PoolStorage(this, new Uint8Array(this.buffer, 0, 0), undefined)
    const block = this.blocks.allocate(n) ?? (this.reclaimCollected() ? this.blocks.allocate(n) : undefined)
    if (block === undefined) {
      throw new OutOfMemoryError({
        message: `memory pool "${this.name}" cannot allocate ${n} bytes: capacity ${this.capacity} bytes, ${this.used} in use, largest free block ${this.blocks.largestFree} bytes${this.heldByThisJob()}`,
        requested: n,
        capacity: this.capacity,
      })
    }
    const storage = new PoolStorage(this, new Uint8Array(this.buffer, block.offset, n), block)
    this.out.set(block, { storage: new WeakRef(storage), job: currentJob() })
    this.registry.register(storage, block, block)
    return storage
  }

  free(storage: Storage): void {
    const s = checkOwner(this, storage) as PoolStorage
    if (s.freed) return
    s.freed = true
    if (s.block === undefined) return
    this.registry.unregister(s.block)
    this.release(s.block)
  }

  /** Allocates no more; its blocks stay valid while their storages are reachable, and its memory goes with the last of them. */
  close(): void {
    this.closed = true
  }

  [Symbol.dispose](): void {
    this.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close()
  }

  private release(block: Block): void {
    if (this.out.delete(block)) this.blocks.free(block.offset)
  }

  /**
   * What a full pool says of its blocks allocated since the program last yielded to the event loop:
   * no collection can prove them unused before it does (see currentJob), whatever the program dropped.
   */
  private heldByThisJob(): string {
    const job = currentJob()
    let [blocks, bytes] = [0, 0]
    for (const [block, out] of this.out) {
      if (out.job !== job) continue
      blocks++
      bytes += block.size
    }
    if (blocks === 0) return ""
    return `; ${blocks} of its blocks (${bytes} bytes) were allocated since the program last yielded to the event loop, and cannot be taken back from tensors dropped before it does: await between a loop's iterations (\`await new Promise((r) => setImmediate(r))\`), or free the storages of tensors you are done with (\`pool.free(tensor.storage)\`)`
  }

  /** Collects garbage (where the process may) and takes back the blocks of collected storages; whether any came back. */
  private reclaimCollected(): boolean {
    const gc = forceGc()
    if (gc === undefined) return false
    gc()
    let reclaimed = false
    for (const [block, { storage }] of this.out) {
      if (storage.deref() !== undefined) continue
      this.registry.unregister(block)
      this.release(block)
      reclaimed = true
    }
    return reclaimed
  }
}

/**
 * A fixed-capacity pool over one SharedArrayBuffer: first-fit blocks, coalesced on free. A block
 * whose Storage is garbage-collected without `free` returns to the pool as well; keep the Storage
 * (or a tensor over it) reachable for as long as raw views of its bytes are in use.
 */
export const createCpuMemoryPool = (options: CpuMemoryPoolOptions): MemoryPool => new CpuMemoryPool(options)
