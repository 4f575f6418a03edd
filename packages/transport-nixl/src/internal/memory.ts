/**
 * Where a tensor's bytes are, as the addon sees them. Host storages are views over shared memory
 * (the same bytes in every thread of the process); device storages must carry their device
 * address in `storage.handle.address` (a bigint), which is how CUDA allocators expose it.
 */
import { DeviceError, type Storage, type Tensor, deviceIndex, isCuda } from "@tensorlane/core"
import type { DeviceMemoryHandle, NativeMemory } from "../AddonTypes.js"
import { TRANSPORT } from "./failures.js"

const deviceAddress = (storage: Storage): bigint => {
  const address = (storage.handle as Partial<DeviceMemoryHandle> | undefined)?.address
  if (typeof address !== "bigint") {
    throw new DeviceError({
      message: `storage ${storage.id} on ${storage.device} has no device address (storage.handle.address): NIXL cannot register it`,
      device: storage.device,
      transport: TRANSPORT,
    })
  }
  return address
}

/** The whole storage: what is registered, once however many views point into it. */
export const storageMemory = (storage: Storage): NativeMemory =>
  isCuda(storage.device)
    ? { mem: "vram", device: deviceIndex(storage.device), address: deviceAddress(storage), length: storage.byteLength }
    : { mem: "dram", device: 0, bytes: storage.bytes }

/** The bytes of a contiguous tensor. */
export const tensorMemory = (tensor: Tensor): NativeMemory => {
  const storage = tensor.storage
  if (isCuda(storage.device)) {
    return { mem: "vram", device: deviceIndex(storage.device), address: deviceAddress(storage) + BigInt(tensor.byteOffset), length: tensor.nbytes }
  }
  return { mem: "dram", device: 0, bytes: storage.bytes.subarray(tensor.byteOffset, tensor.byteOffset + tensor.nbytes) }
}

