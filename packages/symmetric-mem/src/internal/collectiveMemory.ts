/**
 * What every backend's storages share: an allocator whose allocate and free are refused (symmetric
 * memory comes and goes only through the collective calls), and, for GPU backends, device storages
 * whose host bytes are refused.
 */
import { type Allocator, DeviceError, type Device, ObjectFreedError, type Storage, UnsupportedOperationError } from "@tensorlane/core"
import { nextStorageId } from "@tensorlane/core/plugin"

/** The allocator symmetric storages of `backend` name; `copy` moves their bytes (t.to("cpu")) when the backend can. */
export const collectiveAllocator = (backend: string, device: Device, copy?: Allocator["copy"]): Allocator => ({
  name: `symmetric-${backend}`,
  device,
  allocate() {
    throw new UnsupportedOperationError({ message: `${backend} symmetric memory is allocated collectively: call allocateSymmetric on every rank` })
  },
  free() {
    throw new UnsupportedOperationError({ message: `${backend} symmetric memory is freed collectively: call freeSymmetric on every rank` })
  },
  ...(copy === undefined ? {} : { copy }),
})

/**
 * A storage over device memory (`handle` names it); reading its bytes on the host is a DeviceError.
 * Once freed its handle is refused: the memory may be another allocation's by then.
 */
export const deviceStorage = (allocator: Allocator, byteLength: number, handle: object, isFreed: () => boolean): Storage => {
  const id = nextStorageId()
  return {
    id,
    device: allocator.device,
    byteLength,
    get bytes(): Uint8Array {
      throw new DeviceError({
        message: `${allocator.name} memory on ${allocator.device} has no host bytes${isFreed() ? " (and it was freed)" : ""}: copy its tensor with .to("cpu") first`,
        device: allocator.device,
      })
    },
    get handle(): object {
      if (isFreed()) throw new ObjectFreedError({ message: `storage ${id} of ${allocator.name} on ${allocator.device} was freed`, objectId: `storage:${id}` })
      return handle
    },
    allocator,
  }
}
