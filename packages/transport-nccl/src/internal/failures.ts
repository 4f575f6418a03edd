/** Turns the addon's failures (errors with a `code`) into typed errors. */
import { NativeLibraryError, TimeoutError, TransferError, UnsupportedOperationError } from "@tensorlane/core"
import type { NativeFailure, NcclAddon } from "../AddonTypes.js"
import { NcclError, NcclVersionError, NoCudaDeviceError } from "../Errors.js"
import { formatNcclVersion, parseNcclVersion } from "../NcclVersion.js"

export const TRANSPORT = "nccl"

const isNativeFailure = (error: unknown): error is NativeFailure =>
  error instanceof Error && typeof (error as Partial<NativeFailure>).code === "string"

export interface FailureContext {
  readonly addon: NcclAddon
  /** The device the operation used, e.g. "cuda:0". */
  readonly device: string
  /** The limit the operation ran under, for timeouts. */
  readonly timeoutMs?: number
}

/** `what` names the operation ("ncclSend of Worker-0.3 to rank 1 in group nccl-1"). */
export const toTensorlaneError = (error: unknown, what: string, context: FailureContext): Error => {
  if (!isNativeFailure(error)) {
    return error instanceof Error ? error : new TransferError({ message: `${what}: ${String(error)}`, transport: TRANSPORT })
  }
  const message = `${what}: ${error.message}`
  switch (error.code) {
    case "nodevice": {
      const devices = context.addon.probeDevices()
      return new NoCudaDeviceError({
        message: `${message}. CUDA tensors and NCCL communicators need an NVIDIA GPU with its driver`,
        device: context.device,
        driverVersion: devices.driverVersion,
        deviceCount: devices.count,
      })
    }
    case "version": {
      // The addon's gate says "<function> needs NCCL >= <version>"; the TypeScript gates usually refuse first.
      const found = context.addon.loaded().ncclVersion
      return new NcclVersionError({
        message,
        feature: error.message.split(" ")[0],
        required: /needs NCCL >= (\S+)/.exec(error.message)?.[1] ?? "",
        found: found === undefined ? "" : formatNcclVersion(parseNcclVersion(found)),
      })
    }
    case "library":
      return new NativeLibraryError({ message, library: "libnccl.so.2", tried: [], fix: "bash tools/setup.sh" })
    case "usage":
      return new UnsupportedOperationError({ message })
    case "timeout":
      return new TimeoutError({ message, timeoutMs: context.timeoutMs ?? 0 })
    case "aborted":
    case "closed":
      return new TransferError({ message, transport: TRANSPORT })
    case "nccl":
    case "cuda":
      return new NcclError({ message, operation: what })
  }
}
