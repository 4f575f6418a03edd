/**
 * NCCL memory and windows for other packages (the `nccl-window` backend of @tensorlane/symmetric-mem):
 * ncclMemAlloc'd device storage, and ncclCommWindowRegister / ncclCommWindowDeregister on the
 * communicator of an nccl group this process is in. Window registration is collective: every rank
 * of the group calls it, with buffers of the same size, in the same order.
 */
import type { Device, Storage } from "@tensorlane/core"
import type { Collective } from "@tensorlane/core/plugin"
import { deviceAllocator } from "./CudaAllocator.js"
import { requireFeature } from "./NcclVersion.js"
import { toTensorlaneError } from "./internal/failures.js"
import { loadCuda } from "./Loader.js"
import { deviceAddress } from "./internal/memory.js"

/** Device memory from ncclMemAlloc (NCCL >= 2.19), freed with ncclMemFree by `freeNcclMemory` or collection. */
export const allocateNcclMemory = (device: Device, byteLength: number): Storage => {
  requireFeature(loadCuda().version, "registration", "ncclMemAlloc")
  return deviceAllocator(device, true).allocate(byteLength)
}

export const freeNcclMemory = (storage: Storage): void => storage.allocator.free(storage)

export interface NcclWindow {
  readonly group: string
  /** NCCL's ncclWindow_t. */
  readonly window: bigint
  readonly address: bigint
  readonly byteLength: number
}

/** Registers device memory as a window of the group's communicator (NCCL >= 2.27.3); collective. */
export const registerNcclWindow = async (
  group: string,
  storage: Storage,
  options: { readonly symmetric?: boolean; readonly timeoutMs?: number } = {},
): Promise<NcclWindow> => {
  const { addon, version } = loadCuda()
  requireFeature(version, "windows", "ncclCommWindowRegister")
  const what = `ncclCommWindowRegister of ${storage.byteLength} bytes in group "${group}"`
  const address = deviceAddress(storage, what)
  try {
    const window = await addon.registerWindow(group, address, storage.byteLength, options.symmetric ?? true, options.timeoutMs ?? 60_000)
    return { group, window, address, byteLength: storage.byteLength }
  } catch (error) {
    throw toTensorlaneError(error, what, { addon, device: storage.device })
  }
}

/** Deregisters a window with the window API (before its communicator is destroyed); collective. */
export const deregisterNcclWindow = async (window: NcclWindow, options: { readonly timeoutMs?: number } = {}): Promise<void> => {
  const { addon } = loadCuda()
  try {
    await addon.deregisterWindow(window.group, window.window, options.timeoutMs ?? 60_000)
  } catch (error) {
    throw toTensorlaneError(error, `ncclCommWindowDeregister in group "${window.group}"`, { addon, device: "cuda" })
  }
}

/**
 * The group's communicator in this process as runLockstep needs it: broken once aborted, timed
 * out, or gone (destroyed, or replaced by a new creation of the group).
 */
export const communicatorCollective = (group: string): Collective => {
  const { addon } = loadCuda()
  const id = addon.communicators().find((c) => c.group === group)?.id
  return {
    broken: () => {
      const comm = addon.communicators().find((c) => c.id === id)
      return comm === undefined ? "destroyed" : comm.broken
    },
    abort: (reason) => addon.abortCommunicator(group, reason),
    aborted: `its communicator of group "${group}" (ncclCommAbort)`,
  }
}
