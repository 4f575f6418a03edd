/**
 * The contracts of tensor memory: a Storage is one allocation, an Allocator hands them out, a
 * MemoryPool carves one region into blocks. The default CPU allocator and CPU pools are in
 * CpuMemory.ts; which allocator a tensor factory uses (`withAllocator`, device allocators that native
 * packages register) in AllocatorScope.ts; their Effect face (each operation an Effect with the
 * errors it can raise, pools as scoped resources) in TensorlaneMemory.ts.
 *
 * An allocator's operations are synchronous, as tensor factories are: they run on the hottest path
 * there is, once per tensor, and throw only the errors their failure types name.
 */
import type { Device } from "./Device.js"
import type { DeviceError, OutOfMemoryError, PackageError, ShapeError, UnsupportedOperationError } from "./Errors.js"

/** What `allocate` can fail with: a bad byte length, a full pool or device, a closed pool, a device it cannot reach. */
export type AllocationFailure = ShapeError | OutOfMemoryError | UnsupportedOperationError | DeviceError | PackageError

/** What `free` can fail with: a storage of another allocator, a device that refuses to take its memory back. */
export type FreeFailure = UnsupportedOperationError | PackageError

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
  /** Throws an AllocationFailure. */
  allocate(byteLength: number): Storage
  /** Idempotent; throws a FreeFailure. */
  free(storage: Storage): void
  /** Device <-> host and device <-> device copies, provided by native packages. */
  copy?(src: Storage, srcOffset: number, dst: Storage, dstOffset: number, byteLength: number): void
}

/**
 * An allocator over memory it holds until `close()`, its one release verb (also `using`/`await
 * using`, and `TensorlaneMemory.scoped` in Effect code). Closed, it allocates no more; what it
 * closes beyond that is each pool's to say.
 */
export interface MemoryPool extends Allocator, Disposable, AsyncDisposable {
  readonly capacity: number
  /** Bytes held by live blocks, alignment padding included. */
  readonly used: number
  readonly freeBytes: number
  /** The pool's whole host memory, every block a view of it (so that a transport can register it once); undefined for device pools. */
  readonly region: Uint8Array | undefined
  /** Idempotent. */
  close(): void
}

export type DeviceAllocatorFactory = (device: Device) => Allocator
