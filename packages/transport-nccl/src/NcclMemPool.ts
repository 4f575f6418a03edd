/**
 * An NCCL memory pool (Megatron's `create_nccl_mem_pool`): CUDA memory in segments from
 * ncclMemAlloc (cudaMalloc before NCCL 2.19), carved into blocks first-fit. Segments are never
 * given back while the pool lives, so that a segment registered with a communicator stays valid;
 * registration works per segment, in the order segments were allocated (MemPoolRegistration).
 * Blocks return to the pool on `free` or when their storage is garbage-collected.
 */
import {
  type Device,
  DeviceError,
  type MemoryPool,
  ObjectFreedError,
  OutOfMemoryError,
  ShapeError,
  type Storage,
  UnsupportedOperationError,
  deviceIndex,
  isCuda,
  parseDevice,
} from "@tensorlane/core"
import { BlockAllocator, nextStorageId } from "@tensorlane/core/plugin"
import type { DeviceMemoryHandle } from "./AddonTypes.js"
import { copyStorage, cudaCall } from "./CudaAllocator.js"
import { communicatorDevice } from "./NcclTransport.js"
import { supports } from "./NcclVersion.js"
import { loadCuda } from "./Loader.js"

/** Segments are at least this large (as PyTorch's caching allocator's large segments). */
const DEFAULT_SEGMENT_BYTES = 2 << 20
/** CUDA allocations are 256-byte aligned; blocks keep that alignment. */
const BLOCK_ALIGNMENT = 256

export interface NcclMemPoolOptions {
  /** Default: the device of this process's communicators ($TENSORLANE_NCCL_DEVICE, else cuda:0). */
  readonly device?: Device
  /**
   * How registerMemPool and the scopes register this pool unless told: NCCL windows (true) or
   * buffers (false). Unset: Megatron's default, windows, or buffers when the loaded NCCL has none.
   */
  readonly symmetric?: boolean
  /** Smallest segment; larger requests get a segment of their own, rounded up to it. */
  readonly segmentBytes?: number
  /** Limit of all segments together; OutOfMemoryError beyond. Default: none. */
  readonly maxBytes?: number
  readonly name?: string
}

/** One allocation of device memory held by a pool; `index` is its place in allocation order. */
export interface PoolSegment {
  readonly index: number
  readonly address: bigint
  readonly byteLength: number
}

/** How a segment is registered with one group: a buffer registration or a window, with NCCL's handle. */
export interface SegmentRegistration {
  readonly kind: "buffer" | "window"
  readonly handle: bigint
  /** The native id of the communicator holding it: destroying the group ends the registration. */
  readonly communicator: number
}

interface Block {
  readonly segment: number
  readonly offset: number
}

interface SegmentState extends PoolSegment {
  readonly viaNccl: boolean
  readonly blocks: BlockAllocator
}

class PoolBlockStorage implements Storage {
  readonly id = nextStorageId()
  readonly #handle: DeviceMemoryHandle
  freed = false

  constructor(
    readonly allocator: NcclMemPool,
    readonly device: Device,
    readonly byteLength: number,
    address: bigint,
    readonly block: Block | undefined,
  ) {
    this.#handle = { address, device: deviceIndex(device) }
  }

  /** A freed block may be another storage's by now: no device operation reaches it through this one. */
  get handle(): DeviceMemoryHandle {
    if (this.freed) throw this.freedError()
    return this.#handle
  }

  private freedError(): ObjectFreedError {
    return new ObjectFreedError({ message: `storage ${this.id} was freed back to pool "${this.allocator.name}"`, objectId: `storage:${this.id}` })
  }

  get bytes(): Uint8Array {
    if (this.freed) throw this.freedError()
    throw new DeviceError({ message: `storage ${this.id} is on ${this.device}, not in host memory: copy its tensor with .to("cpu") first`, device: this.device })
  }
}

export class NcclMemPool implements MemoryPool {
  readonly name: string
  readonly device: Device
  readonly symmetric: boolean | undefined
  readonly region = undefined
  readonly segmentBytes: number
  readonly maxBytes: number
  /** Registrations by group name, then by segment index. */
  readonly registrations = new Map<string, Map<number, SegmentRegistration>>()
  private readonly segmentList: Array<SegmentState> = []
  private closed = false
  private readonly collected = new FinalizationRegistry<Block>((block) => this.release(block))

  constructor(options: NcclMemPoolOptions = {}) {
    this.device = parseDevice(options.device ?? communicatorDevice())
    if (!isCuda(this.device)) throw new DeviceError({ message: `an NCCL memory pool holds CUDA memory, not ${this.device}`, device: this.device })
    this.name = options.name ?? `nccl-pool:${this.device}`
    this.symmetric = options.symmetric
    this.segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES
    this.maxBytes = options.maxBytes ?? Infinity
    if (!Number.isSafeInteger(this.segmentBytes) || this.segmentBytes < BLOCK_ALIGNMENT) {
      throw new ShapeError({ message: `segmentBytes of pool "${this.name}" must be an integer >= ${BLOCK_ALIGNMENT}, got ${String(options.segmentBytes)}` })
    }
    // NaN compared false with every capacity: no limit at all.
    if (this.maxBytes !== Infinity && (!Number.isSafeInteger(this.maxBytes) || this.maxBytes < 0)) {
      throw new ShapeError({ message: `maxBytes of pool "${this.name}" must be an integer >= 0 or Infinity, got ${String(options.maxBytes)}` })
    }
  }

  /** Bytes of all segments. */
  get capacity(): number {
    return this.segmentList.reduce((n, s) => n + s.byteLength, 0)
  }

  /** Bytes held by live blocks, alignment padding included. */
  get used(): number {
    return this.segmentList.reduce((n, s) => n + s.blocks.used, 0)
  }

  get freeBytes(): number {
    return this.capacity - this.used
  }

  /** Every segment, in allocation order. */
  get segments(): ReadonlyArray<PoolSegment> {
    return this.segmentList.map(({ index, address, byteLength }) => ({ index, address, byteLength }))
  }

  allocate(byteLength: number): Storage {
    if (this.closed) throw new UnsupportedOperationError({ message: `pool "${this.name}" is closed` })
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw new ShapeError({ message: `byteLength must be a non-negative integer, got ${byteLength}` })
    if (byteLength === 0) return new PoolBlockStorage(this, this.device, 0, 0n, undefined)
    const block = this.take(byteLength) ?? this.take(byteLength, this.grow(byteLength))!
    const segment = this.segmentList[block.segment]
    const storage = new PoolBlockStorage(this, this.device, byteLength, segment.address + BigInt(block.offset), block)
    this.collected.register(storage, block, storage)
    return storage
  }

  free(storage: Storage): void {
    if (!(storage instanceof PoolBlockStorage) || storage.allocator !== this) {
      throw new UnsupportedOperationError({ message: `storage ${storage.id} does not belong to pool "${this.name}"` })
    }
    if (storage.freed) return
    storage.freed = true
    if (storage.block === undefined) return
    this.collected.unregister(storage)
    this.release(storage.block)
  }

  copy(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, byteLength: number): void {
    copyStorage(src, srcOffset, dst, dstOffset, byteLength)
  }

  /**
   * Gives every segment back to CUDA. Refused while blocks are in use or while the pool is
   * registered with a group (deregister it first: registered memory must outlive its registration).
   */
  close(): void {
    if (this.closed) return
    forgetEndedRegistrations(this)
    const registered = [...this.registrations].filter(([, r]) => r.size > 0).map(([g]) => g)
    if (registered.length > 0) {
      throw new UnsupportedOperationError({ message: `pool "${this.name}" is still registered with ${registered.join(", ")}: deregisterMemPool first` })
    }
    if (this.used > 0) throw new UnsupportedOperationError({ message: `pool "${this.name}" still has ${this.used} bytes in use` })
    this.closed = true
    for (const s of this.segmentList) {
      cudaCall(s.viaNccl ? "ncclMemFree" : "cudaFree", this.device, (addon) => addon.deviceFree(deviceIndex(this.device), s.address, s.viaNccl))
    }
    this.segmentList.length = 0
  }

  [Symbol.dispose](): void {
    this.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close()
  }

  private take(byteLength: number, only?: number): Block | undefined {
    for (const s of only === undefined ? this.segmentList : [this.segmentList[only]]) {
      const block = s.blocks.allocate(byteLength)
      if (block !== undefined) return { segment: s.index, offset: block.offset }
    }
    return undefined
  }

  private grow(requested: number): number {
    const size = Math.ceil(requested / BLOCK_ALIGNMENT) * BLOCK_ALIGNMENT
    const byteLength = Math.ceil(size / this.segmentBytes) * this.segmentBytes
    if (!Number.isSafeInteger(this.capacity + byteLength)) {
      throw new OutOfMemoryError({
        message: `pool "${this.name}" cannot grow by ${byteLength} bytes: past 2^53 bytes, more than a JS number counts exactly`,
        requested: size,
        capacity: this.maxBytes,
      })
    }
    if (this.capacity + byteLength > this.maxBytes) {
      throw new OutOfMemoryError({
        message: `pool "${this.name}" cannot grow by ${byteLength} bytes: it holds ${this.capacity} of at most ${this.maxBytes}`,
        requested: size,
        capacity: this.maxBytes,
      })
    }
    const viaNccl = supports(loadCuda().version, "registration")
    const address = cudaCall(viaNccl ? "ncclMemAlloc" : "cudaMalloc", this.device, (addon) =>
      addon.deviceAlloc(deviceIndex(this.device), byteLength, viaNccl),
    )
    const index = this.segmentList.length
    this.segmentList.push({ index, address, byteLength, viaNccl, blocks: new BlockAllocator(byteLength, { alignment: BLOCK_ALIGNMENT }) })
    return index
  }

  private release(block: Block): void {
    this.segmentList[block.segment].blocks.free(block.offset)
  }
}

/**
 * Drops the registrations whose communicator is gone (its group destroyed, perhaps created again):
 * destroying a communicator deregistered them in NCCL, and their handles mean nothing to its successor.
 */
export const forgetEndedRegistrations = (pool: NcclMemPool): void => {
  if (pool.registrations.size === 0) return
  const live = new Map(loadCuda().addon.communicators().map((c) => [c.group, c.id]))
  for (const [group, registered] of pool.registrations) {
    for (const [index, r] of registered) if (r.communicator !== live.get(group)) registered.delete(index)
    if (registered.size === 0) pool.registrations.delete(group)
  }
}

/** Megatron's create_nccl_mem_pool: a pool of NCCL memory on one CUDA device. */
export const createNcclMemPool = (options?: NcclMemPoolOptions): NcclMemPool => new NcclMemPool(options)
