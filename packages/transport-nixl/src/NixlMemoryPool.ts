/**
 * A memory pool registered with NIXL once: core's CPU memory pool (one SharedArrayBuffer, first-fit
 * blocks, returned on free or garbage collection) whose whole buffer is one NIXL registration.
 * Tensors allocated from it (`withAllocator(pool, ...)` or `{ allocator: pool }`) travel over nixl,
 * and receive from it as `get` targets, without registering anything per object.
 */
import {
  type CpuMemoryPoolOptions,
  type MemoryPool,
  OutOfMemoryError,
  type Storage,
  UnsupportedOperationError,
  createCpuMemoryPool,
} from "@tensorlane/core"
import type { RegionKey } from "./AddonTypes.js"
import { toTensorlaneError } from "./internal/failures.js"
import { loadNixl } from "./Loader.js"

export interface NixlMemoryPool extends MemoryPool {
  /** Whether the pool's memory is still registered (until close()). */
  readonly registered: boolean
  /** Deregisters the pool (objects still using its blocks keep the registration until they are freed); allocations then fail. */
  close(): void
}

class RegisteredPool implements NixlMemoryPool {
  readonly device = "cpu" as const
  readonly name: string
  private key: RegionKey | undefined

  constructor(
    private readonly inner: MemoryPool,
    key: RegionKey,
  ) {
    this.name = inner.name
    this.key = key
  }

  get capacity(): number {
    return this.inner.capacity
  }

  get used(): number {
    return this.inner.used
  }

  get freeBytes(): number {
    return this.inner.freeBytes
  }

  get region(): Uint8Array | undefined {
    return this.inner.region
  }

  get registered(): boolean {
    return this.key !== undefined
  }

  allocate(byteLength: number): Storage {
    if (this.key === undefined) {
      throw new UnsupportedOperationError({ message: `NIXL memory pool "${this.name}" is closed: its memory is no longer registered` })
    }
    try {
      return this.inner.allocate(byteLength)
    } catch (error) {
      if (!(error instanceof OutOfMemoryError)) throw error
      throw new OutOfMemoryError({
        message: `NIXL memory pool "${this.name}" (${this.capacity} bytes, registered once) is exhausted: ${error.message}. Free tensors of the pool (release their refs) or create a larger pool.`,
        requested: error.requested,
        capacity: this.capacity,
      })
    }
  }

  free(storage: Storage): void {
    this.inner.free(storage)
  }

  close(): void {
    if (this.key === undefined) return
    const key = this.key
    this.key = undefined
    this.inner.close()
    loadNixl().addon.release(key)
  }

  [Symbol.dispose](): void {
    this.close()
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close()
  }
}

/**
 * Creates a CPU memory pool of `capacity` bytes and registers all of it with this process's NIXL
 * agent (one registration, whatever is allocated from it later).
 */
export const createNixlMemoryPool = (options: CpuMemoryPoolOptions): NixlMemoryPool => {
  const name = options.name ?? "nixl-pool"
  const inner = createCpuMemoryPool({ ...options, name })
  const region = inner.region!
  const { addon } = loadNixl()
  let key: RegionKey
  try {
    key = addon.acquire({ mem: "dram", device: 0, bytes: region })
  } catch (error) {
    throw toTensorlaneError(error, `registering NIXL memory pool "${name}" (${inner.capacity} bytes)`)
  }
  return new RegisteredPool(inner, key)
}
