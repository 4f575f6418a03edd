/**
 * CUDA device memory for core: `cudaAllocator("cuda:N")` allocates with cudaMalloc, copies with
 * cudaMemcpy (host to device, device to host, device to device), and frees with cudaFree when
 * `free` is called or when the storage is garbage-collected (core frees memory by collection).
 * Importing this package registers it with core's `registerDeviceAllocator("cuda", ...)`, in every
 * thread that imports it (actor main threads and transfer agents alike).
 */
import {
  type Allocator,
  DeviceError,
  type Device,
  ObjectFreedError,
  type Storage,
  UnsupportedOperationError,
  deviceIndex,
  isCuda,
  parseDevice,
} from "@tensorlane/core"
import { nextStorageId, registerDeviceAllocator } from "@tensorlane/core/plugin"
import type { DeviceMemoryHandle, NcclAddon } from "./AddonTypes.js"
import { toTensorlaneError } from "./internal/failures.js"
import { loadCuda } from "./Loader.js"
import { deviceAddress } from "./internal/memory.js"

/** What must be given back when device memory is freed (held apart from the storage, for the collector). */
export interface DeviceRange {
  readonly address: bigint
  readonly device: number
  readonly viaNccl: boolean
  freed: boolean
}

export class CudaStorage implements Storage {
  readonly id = nextStorageId()
  readonly #handle: DeviceMemoryHandle

  constructor(
    readonly allocator: Allocator,
    readonly device: Device,
    readonly byteLength: number,
    readonly range: DeviceRange,
  ) {
    this.#handle = { address: range.address, device: range.device }
  }

  /** Every device operation (copies, NCCL, NIXL) finds the memory here: freed memory is never reached again. */
  get handle(): DeviceMemoryHandle {
    if (this.range.freed) throw freedStorage(this)
    return this.#handle
  }

  get bytes(): Uint8Array {
    if (this.range.freed) throw freedStorage(this)
    throw new DeviceError({
      message: `storage ${this.id} is on ${this.device}, not in host memory: copy its tensor with .to("cpu") first`,
      device: this.device,
    })
  }
}

/** The error of a use of device memory after its free (its address may belong to another allocation by now). */
export const freedStorage = (storage: Storage): ObjectFreedError =>
  new ObjectFreedError({ message: `storage ${storage.id} on ${storage.device} was freed`, objectId: `storage:${storage.id}` })

/** Runs a native call, turning its failure into a typed error (NoCudaDeviceError without a GPU). */
export const cudaCall = <A>(what: string, device: Device, call: (addon: NcclAddon) => A): A => {
  const { addon } = loadCuda()
  try {
    return call(addon)
  } catch (error) {
    throw toTensorlaneError(error, what, { addon, device })
  }
}

const freeRange = (range: DeviceRange): void => {
  if (range.freed) return
  range.freed = true
  cudaCall(range.viaNccl ? "ncclMemFree" : "cudaFree", `cuda:${range.device}`, (addon) => addon.deviceFree(range.device, range.address, range.viaNccl))
}

// Device memory is not collected by V8: a storage that becomes unreachable gives its memory back here.
const collected = new FinalizationRegistry<DeviceRange>((range) => {
  try {
    freeRange(range)
  } catch {
    // A failed cudaFree at collection has no caller to tell; the memory stays with the driver.
  }
})

/** Device memory of `device`: fresh cudaMalloc (or ncclMemAlloc) memory, freed by collection or `free`. */
export const allocateDevice = (allocator: Allocator, device: Device, byteLength: number, viaNccl: boolean): CudaStorage => {
  const index = deviceIndex(device)
  const address = cudaCall(viaNccl ? "ncclMemAlloc" : "cudaMalloc", device, (addon) => addon.deviceAlloc(index, byteLength, viaNccl))
  const range: DeviceRange = { address, device: index, viaNccl, freed: false }
  const storage = new CudaStorage(allocator, device, byteLength, range)
  collected.register(storage, range, storage)
  return storage
}

export const freeDevice = (storage: CudaStorage): void => {
  collected.unregister(storage)
  freeRange(storage.range)
}

/** Copies between host and device memory (or between device ranges) with cudaMemcpy. */
export const copyStorage = (src: Storage, srcOffset: number, dst: Storage, dstOffset: number, byteLength: number): void => {
  const what = `copy of ${byteLength} bytes from ${src.device} to ${dst.device}`
  if (src.device === "cpu" && isCuda(dst.device)) {
    const from = src.bytes.subarray(srcOffset, srcOffset + byteLength)
    const to = deviceAddress(dst, what) + BigInt(dstOffset)
    cudaCall(what, dst.device, (addon) => addon.copyToDevice(deviceIndex(dst.device), to, from))
  } else if (isCuda(src.device) && dst.device === "cpu") {
    const from = deviceAddress(src, what) + BigInt(srcOffset)
    const to = dst.bytes.subarray(dstOffset, dstOffset + byteLength)
    cudaCall(what, src.device, (addon) => addon.copyToHost(deviceIndex(src.device), to, from))
  } else if (isCuda(src.device) && isCuda(dst.device)) {
    const from = deviceAddress(src, what) + BigInt(srcOffset)
    const to = deviceAddress(dst, what) + BigInt(dstOffset)
    cudaCall(what, dst.device, (addon) => addon.copyOnDevice(deviceIndex(dst.device), to, from, byteLength))
  } else {
    throw new UnsupportedOperationError({ message: `${what}: host to host copies are core's` })
  }
}

const ownedBy = (allocator: Allocator, storage: Storage): CudaStorage => {
  if (!(storage instanceof CudaStorage) || storage.allocator !== allocator) {
    throw new UnsupportedOperationError({ message: `storage ${storage.id} does not belong to allocator "${allocator.name}"` })
  }
  return storage
}

const allocators = new Map<string, Allocator>()

/** The allocator of a CUDA device whose memory comes from cudaMalloc, or from ncclMemAlloc (one of each per device). */
export const deviceAllocator = (device: Device, viaNccl: boolean): Allocator => {
  const d = parseDevice(device)
  if (!isCuda(d)) throw new DeviceError({ message: `a CUDA allocator allocates CUDA memory, not ${d}`, device: d })
  const name = `${viaNccl ? "nccl-mem" : "cuda-malloc"}:${d}`
  let allocator = allocators.get(name)
  if (allocator === undefined) {
    const created: Allocator = {
      name,
      device: d,
      allocate: (byteLength) => allocateDevice(created, d, byteLength, viaNccl),
      free: (storage) => freeDevice(ownedBy(created, storage)),
      copy: copyStorage,
    }
    allocators.set(name, (allocator = created))
  }
  return allocator
}

/** The cudaMalloc allocator of a CUDA device: what core uses for "cuda:N" unless a pool is in scope. */
export const cudaAllocator = (device: Device): Allocator => deviceAllocator(device, false)

registerDeviceAllocator("cuda", cudaAllocator)
