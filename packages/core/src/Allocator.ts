/**
 * Where tensor memory comes from. The default CPU allocator hands out SharedArrayBuffer-backed
 * storage (so worker threads can read and write it); memory pools carve one buffer into blocks;
 * native packages register allocators for device memory. `withAllocator` scopes an allocator over
 * a synchronous or asynchronous computation.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import { totalmem } from "node:os"
import { parseDevice, type Device } from "./Device.js"
import { DeviceError, ObjectFreedError, OutOfMemoryError, ShapeError, UnsupportedOperationError } from "./Errors.js"
import { type Block, BlockAllocator } from "./BlockAllocator.js"
import { checkIndex } from "./internal/layout.js"
import { integerSetting, readSetting } from "./Settings.js"

/** One allocation; many tensors (views) may share it. */
export interface Storage {
  /** Unique within this JS realm (main thread or one worker); used to register a storage once. */
  readonly id: number
  readonly device: Device
  readonly byteLength: number
  /** CPU: a view over a SharedArrayBuffer. Device storage: the getter throws DeviceError. */
  readonly bytes: Uint8Array
  /** Opaque device handle filled by native packages (e.g. a CUDA pointer object); undefined for CPU. */
  readonly handle: unknown
  readonly allocator: Allocator
}

export interface Allocator {
  readonly name: string
  readonly device: Device
  allocate(byteLength: number): Storage
  /** Idempotent. */
  free(storage: Storage): void
  /** Device <-> host and device <-> device copies, provided by native packages. */
  copy?(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, byteLength: number): void
}

export interface MemoryPool extends Allocator {
  readonly capacity: number
  /** Bytes held by live blocks, alignment padding included. */
  readonly used: number
  readonly freeBytes: number
  /** The pool's whole host memory, every block a view of it (so that a transport can register it once); undefined for device pools. */
  readonly region: Uint8Array | undefined
}

export type DeviceAllocatorFactory = (device: Device) => Allocator

interface Scope {
  readonly allocator: Allocator
  readonly parent: Scope | undefined
}

interface AllocatorState {
  nextStorageId: number
  readonly scope: AsyncLocalStorage<Scope>
  readonly factories: Map<"cuda", DeviceAllocatorFactory>
  readonly deviceAllocators: Map<Device, Allocator>
}

// Shared through globalThis so that duplicated copies of this module (a native package resolving
// its own @tensorlane/core) see the same registrations, scopes and storage ids.
const STATE_KEY = Symbol.for("tensorlane.allocatorState.v1")
const state: AllocatorState = ((globalThis as { [STATE_KEY]?: AllocatorState })[STATE_KEY] ??= {
  nextStorageId: 1,
  scope: new AsyncLocalStorage<Scope>(),
  factories: new Map(),
  deviceAllocators: new Map(),
})

/** A fresh storage id for allocators, including those of native packages. */
export const nextStorageId = (): number => state.nextStorageId++

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

/** Storages below this size are not worth recycling: fresh small allocations are cheap. */
const RECYCLE_MIN_BYTES = 1 << 20

/** Blocks of one size out (alive, or dead and unproven) before a miss collects, at first (see HostMemoryCache). */
const FIRST_BLOCKS_OUT = 2
/** The most blocks of one size out before a miss collects: as many as half the cache holds, 2 to 8 (64 MiB: 8 of the default 1 GiB). */
const mostBlocksOut = (byteLength: number, capacity: number): number =>
  Math.min(8, Math.max(FIRST_BLOCKS_OUT, Math.floor(capacity / 2 / byteLength)))
/** How long a measured collection time stands for the next one. */
const STALE_ESTIMATE_MS = 1000

const recycleCapacity = (): number =>
  readSetting(integerSetting("TENSORLANE_HOST_CACHE_BYTES", { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: Math.min(2 ** 30, totalmem() / 16), unit: "bytes" }))

/** A SharedArrayBuffer handed out, and the second object over its memory that the cache keeps. */
interface Lent {
  readonly handed: WeakRef<SharedArrayBuffer>
  readonly keeper: SharedArrayBuffer
}

/** `gc` exists when the process runs with --expose-gc (tensorlane starts actor processes so). */
const forceGc = (): (() => void) | undefined => (globalThis as { gc?: () => void }).gc

/**
 * Recycles the memory of large host storages once the garbage collector has proven that nothing can
 * reach it (no tensor, storage or typed array holds its SharedArrayBuffer any more). Touching fresh
 * pages costs more than the copy into them (on this project's VMs a fresh 64 MiB costs 45 ms of page
 * faults, a warm one 3 ms), so a transfer loop that allocates a receive buffer each time would run at
 * the speed of page faults. The cache keeps a second SharedArrayBuffer object over the same memory
 * (structured clone shares it); a FinalizationRegistry returns it when the handed object dies, and
 * after a collection WeakRefs tell at once which memory is free again.
 *
 * Collections belong to idle moments (`collectIdle`: an actor calls it after a call that dropped large
 * tensors, and while a call waits for a receive, so that a producer and its consumer collect on the
 * same call of a loop: object-store 64 MiB 20.2 -> 18.8 ms, gloo 24.8 -> 24.6, medians of alternate
 * runs), and each costs the same whatever it frees (about 5 ms for an actor's heap here), so they
 * wait until an allocation would miss. A loop that frees a result and at once allocates the next
 * cannot wait for one, so a miss takes fresh memory while fewer than a size's allowance of blocks
 * are out; an idle collection runs once a size has its allowance out and none idle, recycles all but
 * the one still held, and raises that size's allowance by one (from 2 up to `mostBlocksOut`): a long
 * loop of 64 MiB results ends up collecting once every seven calls instead of after each
 * (`tensorlane bench`, 64 MiB, alternate runs: gloo 47-55 -> 33-35 ms median, object-store 46-76 ->
 * 41-53, nixl 43-47 -> 30-37), while a short one pays for few fresh blocks. Beyond its allowance, a
 * miss collects on the spot, which bounds the memory to what the program really holds.
 */
class HostMemoryCache {
  private readonly idle = new Map<number, Array<SharedArrayBuffer>>()
  private readonly lent = new Map<number, Set<Lent>>()
  private idleBytes = 0
  private readonly capacity = recycleCapacity()
  /** When each size was last taken (a count of takes), to let the stalest sizes go first. */
  private readonly lastTaken = new Map<number, number>()
  private takes = 0
  /** Blocks of each size that may be out before a miss collects. */
  private readonly allowance = new Map<number, number>()
  /** Bytes the process dropped since the last collection. */
  private droppedBytes = 0
  private lastCollectMs = 0
  private lastCollectAt = 0
  private readonly released = new FinalizationRegistry<Lent>((lent) => this.reclaim(lent))

  /**
   * Collects now, when the process is idle, so that the memory dropped since the last collection
   * waits, warm, for the next large allocation; only when an allocation would otherwise miss.
   */
  collectIdle(droppedBytes: number): void {
    this.droppedBytes += droppedBytes
    const gc = forceGc()
    if (gc === undefined) return
    const short = this.sizesRunningOut()
    if (short.length === 0 || !this.worthCollecting(this.droppedBytes)) return
    this.runCollection(gc)
    for (const byteLength of short) this.allowance.set(byteLength, Math.min(mostBlocksOut(byteLength, this.capacity), this.blocksOut(byteLength) + 1))
    // The registry's callbacks run later, as a task: what just died is made idle now.
    for (const set of this.lent.values()) for (const lent of set) if (lent.handed.deref() === undefined) this.reclaim(lent)
  }

  /**
   * A collection pays when it costs less than faulting in the pages it may recycle (about 2 GB/s
   * here). One slow collection (a busy machine) must not rule them out for good: after a second the
   * estimate is measured again.
   */
  private worthCollecting(bytes: number): boolean {
    if (bytes < RECYCLE_MIN_BYTES) return false
    return this.lastCollectMs <= bytes / 2e6 || performance.now() - this.lastCollectAt > STALE_ESTIMATE_MS
  }

  private blocksOut(byteLength: number): number {
    return this.allowance.get(byteLength) ?? FIRST_BLOCKS_OUT
  }

  /** Sizes with their allowance of blocks out and none idle: their next allocation would miss. */
  private sizesRunningOut(): Array<number> {
    return [...this.lent].filter(([byteLength, set]) => set.size >= this.blocksOut(byteLength) && (this.idle.get(byteLength)?.length ?? 0) === 0).map(([byteLength]) => byteLength)
  }

  private runCollection(gc: () => void): void {
    const started = performance.now()
    this.droppedBytes = 0
    gc()
    this.lastCollectAt = performance.now()
    this.lastCollectMs = this.lastCollectAt - started
  }

  take(byteLength: number): SharedArrayBuffer {
    if (byteLength < RECYCLE_MIN_BYTES || this.capacity === 0) return new SharedArrayBuffer(byteLength)
    this.lastTaken.set(byteLength, ++this.takes)
    // Collect before looking: a WeakRef looked at keeps its target alive until the current job ends.
    const keeper = this.idleOne(byteLength) ?? (this.collect(byteLength), this.deadOne(byteLength))
    const memory = keeper ?? new SharedArrayBuffer(byteLength)
    const handed = keeper === undefined ? memory : structuredClone(memory)
    const lent: Lent = { handed: new WeakRef(handed), keeper: keeper ?? structuredClone(memory) }
    this.lentOf(byteLength).add(lent)
    this.released.register(handed, lent)
    return handed
  }

  /**
   * Lets idle blocks of other sizes go, those taken longest ago first, until `byteLength` fits: a
   * program that moved on to another size would otherwise keep the cache full of sizes it no
   * longer asks for, and pay page faults for every block of the size it does.
   */
  private makeRoom(byteLength: number): void {
    while (this.idleBytes + byteLength > this.capacity) {
      let stalest: Array<SharedArrayBuffer> | undefined
      let stalestTaken = Infinity
      for (const [size, list] of this.idle) {
        const taken = this.lastTaken.get(size) ?? 0
        if (size !== byteLength && list.length > 0 && taken < stalestTaken) {
          stalest = list
          stalestTaken = taken
        }
      }
      const evicted = stalest?.pop()
      if (evicted === undefined) return
      this.idleBytes -= evicted.byteLength
    }
  }

  private lentOf(byteLength: number): Set<Lent> {
    let set = this.lent.get(byteLength)
    if (set === undefined) this.lent.set(byteLength, (set = new Set()))
    return set
  }

  private idleOne(byteLength: number): SharedArrayBuffer | undefined {
    const keeper = this.idle.get(byteLength)?.pop()
    if (keeper !== undefined) this.idleBytes -= byteLength
    return keeper
  }

  private deadOne(byteLength: number): SharedArrayBuffer | undefined {
    const set = this.lent.get(byteLength)
    if (set === undefined) return undefined
    for (const lent of set) {
      if (lent.handed.deref() !== undefined) continue
      set.delete(lent)
      return lent.keeper
    }
    return undefined
  }

  private collect(byteLength: number): void {
    const gc = forceGc()
    if (gc === undefined || (this.lent.get(byteLength)?.size ?? 0) < this.blocksOut(byteLength) || !this.worthCollecting(byteLength)) return
    this.runCollection(gc)
  }

  private reclaim(lent: Lent): void {
    const byteLength = lent.keeper.byteLength
    if (!this.lent.get(byteLength)?.delete(lent)) return
    this.makeRoom(byteLength)
    if (this.idleBytes + byteLength > this.capacity) return
    const list = this.idle.get(byteLength) ?? []
    list.push(lent.keeper)
    this.idle.set(byteLength, list)
    this.idleBytes += byteLength
  }
}

const hostMemory = new HostMemoryCache()

/**
 * For a process's idle moments, after it dropped tensors of `droppedBytes` (tensorlane's actors call
 * it once no call runs after a free, or after a call that received copies): collects garbage now if
 * that is cheaper than faulting that much fresh memory in, so that the memory waits, warm, for the
 * next allocation instead of costing a collection (or page faults) on its critical path.
 */
export const recycleHostMemory = (droppedBytes: number): void => hostMemory.collectIdle(droppedBytes)

/** The default allocator: one SharedArrayBuffer per storage; large ones recycled after garbage collection. */
export const cpuAllocator: Allocator = {
  name: "cpu",
  device: "cpu",
  allocate(byteLength) {
    const n = checkIndex(byteLength, "byteLength")
    let buffer: SharedArrayBuffer
    try {
      buffer = hostMemory.take(n)
    } catch (e) {
      throw new OutOfMemoryError({
        message: `cannot allocate ${n} bytes of host memory: ${e instanceof Error ? e.message : String(e)}`,
        requested: n,
        capacity: totalmem(),
      })
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
  private readonly out = new Map<Block, WeakRef<PoolStorage>>()
  // Holds only the block, never the storage, so an unreachable storage can be collected.
  private readonly registry = new FinalizationRegistry<Block>((block) => this.release(block))

  constructor(options: CpuMemoryPoolOptions) {
    this.name = options.name ?? "cpu-pool"
    this.capacity = checkIndex(options.capacity, `capacity of memory pool "${this.name}"`)
    this.alignment = options.alignment ?? 64
    if (!Number.isSafeInteger(this.alignment) || this.alignment < 8 || (this.alignment & (this.alignment - 1)) !== 0) {
      throw new ShapeError({
        message: `alignment of memory pool "${this.name}" must be a power of two >= 8, got ${String(options.alignment)}`,
      })
    }
    this.buffer = new SharedArrayBuffer(this.capacity)
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
    const n = checkIndex(byteLength, "byteLength")
    if (n === 0) return new PoolStorage(this, new Uint8Array(this.buffer, 0, 0), undefined)
    const block = this.blocks.allocate(n) ?? (this.reclaimCollected() ? this.blocks.allocate(n) : undefined)
    if (block === undefined) {
      throw new OutOfMemoryError({
        message: `memory pool "${this.name}" cannot allocate ${n} bytes: capacity ${this.capacity} bytes, ${this.used} in use, largest free block ${this.blocks.largestFree} bytes`,
        requested: n,
        capacity: this.capacity,
      })
    }
    const storage = new PoolStorage(this, new Uint8Array(this.buffer, block.offset, n), block)
    this.out.set(block, new WeakRef(storage))
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

  private release(block: Block): void {
    if (this.out.delete(block)) this.blocks.free(block.offset)
  }

  /** Collects garbage (where the process may) and takes back the blocks of collected storages; whether any came back. */
  private reclaimCollected(): boolean {
    const gc = forceGc()
    if (gc === undefined) return false
    gc()
    let reclaimed = false
    for (const [block, storage] of this.out) {
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

/**
 * Runs `fn` (sync or async) with `allocator` as the allocator of its device: tensor factories
 * inside it, across awaits, allocate from it unless given an explicit allocator.
 */
export const withAllocator = <A>(allocator: Allocator, fn: () => A): A =>
  state.scope.run({ allocator, parent: state.scope.getStore() }, fn)

/** The allocator factories use for `device`: the innermost `withAllocator` scope of it, else the default. */
export const currentAllocator = (device: Device): Allocator => {
  const d = parseDevice(device)
  for (let s = state.scope.getStore(); s !== undefined; s = s.parent) {
    if (s.allocator.device === d) return s.allocator
  }
  if (d === "cpu") return cpuAllocator
  const cached = state.deviceAllocators.get(d)
  if (cached !== undefined) return cached
  const factory = state.factories.get("cuda")
  if (factory === undefined) {
    throw new DeviceError({
      message: `no allocator is registered for ${d}: install @tensorlane/transport-nccl, which provides CUDA memory`,
      device: d,
    })
  }
  const allocator = factory(d)
  state.deviceAllocators.set(d, allocator)
  return allocator
}

/** For native packages: provides the allocators of a device kind (replacing an earlier registration). */
export const registerDeviceAllocator = (kind: "cuda", factory: DeviceAllocatorFactory): void => {
  if (kind !== "cuda") {
    throw new DeviceError({ message: `cannot register allocators for device kind ${String(kind)}`, device: String(kind) })
  }
  state.factories.set(kind, factory)
  for (const d of state.deviceAllocators.keys()) if (d.startsWith(`${kind}:`)) state.deviceAllocators.delete(d)
}
