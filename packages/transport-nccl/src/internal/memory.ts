/** The CUDA address behind a storage or tensor, read from its `handle` (a DeviceMemoryHandle). */
import { DeviceError, type Storage, type Tensor, isCuda } from "@tensorlane/core"
import type { DeviceMemoryHandle } from "../AddonTypes.js"
import { TRANSPORT } from "./failures.js"

/** The CUDA address of a storage; DeviceError for host storage or one without an address. */
export const deviceAddress = (storage: Storage, what: string): bigint => {
  const address = (storage.handle as Partial<DeviceMemoryHandle> | undefined)?.address
  if (!isCuda(storage.device) || typeof address !== "bigint") {
    throw new DeviceError({
      message: `${what}: a tensor on ${storage.device} cannot travel over nccl, which moves cuda memory`,
      device: storage.device,
      transport: TRANSPORT,
    })
  }
  return address
}

/** Address of a tensor's first byte; it must be contiguous (NCCL moves plain ranges). */
export const tensorAddress = (t: Tensor, what: string): bigint => deviceAddress(t.storage, what) + BigInt(t.byteOffset)
