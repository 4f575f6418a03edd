/** Turns the addon's failures (errors with a `code`) into typed tensorlane errors. */
import { NativeLibraryError, ProtocolError, TransferError, UnsupportedOperationError } from "@tensorlane/core"
import type { NativeFailure } from "../AddonTypes.js"
import { NVSHMEM_FIX, NVSHMEM_LIBRARY } from "./loadAddon.js"

export const TRANSPORT = "shm"

export const isNativeFailure = (error: unknown): error is NativeFailure =>
  error instanceof Error && typeof (error as Partial<NativeFailure>).code === "string"

/** `what` names the operation ("shm fetch of driver.3 from Worker-0"). */
export const toTensorlaneError = (error: unknown, what: string): Error => {
  if (!isNativeFailure(error)) return error instanceof Error ? error : new TransferError({ message: `${what}: ${String(error)}`, transport: TRANSPORT })
  switch (error.code) {
    case "protocol":
      return new ProtocolError({ message: `${what}: ${error.message}` })
    case "usage":
      return new UnsupportedOperationError({ message: `${what}: ${error.message}` })
    case "library":
      // Only NVSHMEM is a library the addon loads.
      return new NativeLibraryError({ message: `${what}: ${error.message}`, library: NVSHMEM_LIBRARY, tried: [], fix: NVSHMEM_FIX })
    case "system":
      return new TransferError({ message: `${what}: ${error.message}`, transport: TRANSPORT })
  }
}
