/**
 * Tensors handed between the main thread and the transfer agent of one process: the memory is
 * shared (SharedArrayBuffer), only the view description is copied.
 */
import type { Storage } from "../Allocator.js"
import { cpuAllocator } from "../CpuMemory.js"
import type { Device } from "../Device.js"
import type { DType } from "../DType.js"
import { DeviceError } from "../Errors.js"
import { Tensor } from "../Tensor.js"

export interface WireTensor {
  readonly memory: SharedArrayBuffer | undefined
  readonly memoryOffset: number
  readonly storageId: number
  readonly storageBytes: number
  readonly device: Device
  readonly handle: unknown
  readonly dtype: DType
  readonly shape: ReadonlyArray<number>
  readonly strides: ReadonlyArray<number>
  readonly offset: number
}

export const toWireTensor = (tensor: Tensor): WireTensor => {
  const storage = tensor.storage
  let memory: SharedArrayBuffer | undefined
  let memoryOffset = 0
  if (storage.device === "cpu") {
    const bytes = storage.bytes
    if (!(bytes.buffer instanceof SharedArrayBuffer)) {
      throw new DeviceError({
        message: "CPU tensors handed to a transport must live in shared memory; allocate them through a tensorlane allocator",
        device: storage.device,
      })
    }
    memory = bytes.buffer
    memoryOffset = bytes.byteOffset
  }
  return {
    memory,
    memoryOffset,
    storageId: storage.id,
    storageBytes: storage.byteLength,
    device: storage.device,
    handle: storage.handle,
    dtype: tensor.dtype,
    shape: tensor.shape,
    strides: tensor.strides,
    offset: tensor.offset,
  }
}

/** Storage objects rebuilt on this side, one per storage of the other side, so views keep sharing one. */
const rebuilt = new Map<number, WeakRef<Storage>>()
const forget = new FinalizationRegistry<number>((id) => {
  if (rebuilt.get(id)?.deref() === undefined) rebuilt.delete(id)
})

const sharedStorage = (wire: WireTensor): Storage => {
  const cached = rebuilt.get(wire.storageId)?.deref()
  if (cached !== undefined && cached.byteLength === wire.storageBytes) return cached
  const bytes = wire.memory === undefined ? undefined : new Uint8Array(wire.memory, wire.memoryOffset, wire.storageBytes)
  const storage: Storage = {
    id: wire.storageId,
    device: wire.device,
    byteLength: wire.storageBytes,
    get bytes(): Uint8Array {
      if (bytes === undefined) {
        throw new DeviceError({ message: `storage on ${wire.device} has no host bytes`, device: wire.device })
      }
      return bytes
    },
    handle: wire.handle,
    allocator: cpuAllocator,
  }
  rebuilt.set(wire.storageId, new WeakRef(storage))
  forget.register(storage, wire.storageId)
  return storage
}

export const fromWireTensor = (wire: WireTensor): Tensor =>
  Tensor.fromStorage(sharedStorage(wire), {
    dtype: wire.dtype,
    shape: wire.shape,
    strides: wire.strides,
    offset: wire.offset,
  })
