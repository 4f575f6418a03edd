/**
 * The contracts of tensor memory: a Storage is one allocation, an Allocator hands them out, a
 * MemoryPool carves one region into blocks. The default CPU allocator and CPU pools are in
 * CpuMemory.ts; which allocator a tensor factory uses (`withAllocator`, device allocators that native
 * packages register) in AllocatorScope.ts.
 */
import type { Device } from "./Device.js"

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
