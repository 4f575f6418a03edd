/** Turns the addon's failures into typed errors (core's nativeError, with NCCL's own errors for NCCL's codes). */
import { nativeError } from "@tensorlane/core/native"
import type { NcclAddon } from "../AddonTypes.js"
import { NcclError, NcclVersionError, NoCudaDeviceError } from "../Errors.js"
import { formatNcclVersion, parseNcclVersion } from "../NcclVersion.js"
import { NCCL } from "../Loader.js"

export const TRANSPORT = "nccl"

export interface FailureContext {
  readonly addon: NcclAddon
  /** The device the operation used, e.g. "cuda:0". */
  readonly device: string
  /** The limit the operation ran under, for timeouts. */
  readonly timeoutMs?: number
}

/** `what` names the operation ("ncclSend of Worker-0.3 to rank 1 in group nccl-1"). */
export const toTensorlaneError = (error: unknown, what: string, context: FailureContext): Error =>
  nativeError(error, what, { transport: TRANSPORT, library: NCCL, timeoutMs: context.timeoutMs }, (failure, message) => {
    switch (failure.code) {
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
          feature: failure.message.split(" ")[0],
          required: /needs NCCL >= (\S+)/.exec(failure.message)?.[1] ?? "",
          found: found === undefined ? "" : formatNcclVersion(parseNcclVersion(found)),
        })
      }
      case "nccl":
      case "cuda":
        return new NcclError({ message, operation: what })
      default:
        return undefined
    }
  })
