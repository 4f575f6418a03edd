/**
 * Tensors' storage: the dtype, device and allocator that a factory's options select, and copies
 * between the storages of different devices.
 */
import type { Allocator, Storage } from "../Allocator.js"
import { currentAllocator } from "../AllocatorScope.js"
import { type Device, parseDevice } from "../Device.js"
import { type DType, dtypeOf } from "../DType.js"
import { DeviceError } from "../Errors.js"

/** What selects a new tensor's storage; `device` defaults to the allocator's, else the CPU. */
export const tensorOptions = (opts: { readonly dtype?: DType; readonly device?: Device; readonly allocator?: Allocator } | undefined): { dtype: DType; device: Device; allocator: Allocator } => {
  const dtype = dtypeOf(opts?.dtype ?? "float32").name
  const allocator = opts?.allocator
  const device = parseDevice(opts?.device ?? allocator?.device ?? "cpu")
  if (allocator === undefined) return { dtype, device, allocator: currentAllocator(device) }
  if (allocator.device !== device) {
    throw new DeviceError({
      message: `allocator "${allocator.name}" allocates on ${allocator.device}, not on the requested ${device}`,
      device,
    })
  }
  return { dtype, device, allocator }
}

/**
 * New storage of `allocator` (on `device`) holding `byteLength` bytes of `src` from `srcOffset`,
 * copied by whichever of the two allocators provides `copy`.
 */
export const copyToAllocator = (src: Storage, srcOffset: number, byteLength: number, device: Device, allocator: Allocator): Storage => {
  if (allocator.device !== device) {
    throw new DeviceError({
      message: `allocator "${allocator.name}" allocates on ${allocator.device}, not ${device}`,
      device,
    })
  }
  const storage = allocator.allocate(byteLength)
  if (byteLength > 0) {
    // The native side owns the copy: prefer the allocator that is not the host one.
    const candidates = src.device === "cpu" ? [allocator, src.allocator] : [src.allocator, allocator]
    const copier = candidates.find((a) => a.copy !== undefined)
    if (copier?.copy === undefined) {
      allocator.free(storage)
      throw new DeviceError({
        message: `cannot copy from ${src.device} to ${device}: neither allocator "${src.allocator.name}" nor "${allocator.name}" provides copy`,
        device: src.device === "cpu" ? device : src.device,
      })
    }
    copier.copy(src, srcOffset, storage, 0, byteLength)
  }
  return storage
}
