/** Turns the addon's failures (errors with a `code`) into typed tensorlane errors that say what to do. */
import { DTypeError, ProtocolError, TimeoutError, TransferError } from "@tensorlane/core"
import type { NativeFailure } from "../AddonTypes.js"

export const TRANSPORT = "gloo"

const RECREATE = "destroy the group (group.destroy()) and create it again with cluster.createCollectiveGroup"

const isNativeFailure = (error: unknown): error is NativeFailure =>
  error instanceof Error && typeof (error as Partial<NativeFailure>).code === "string"

/**
 * `what` names the operation ("receive of 1.2 from rank 0 in group "g""); `timeoutMs` is the gloo
 * wait limit the operation ran with.
 */
export const toTensorlaneError = (error: unknown, what: string, timeoutMs: number): Error => {
  if (!isNativeFailure(error)) return error instanceof Error ? error : new TransferError({ message: `${what}: ${String(error)}`, transport: TRANSPORT })
  switch (error.code) {
    case "protocol":
      return new ProtocolError({ message: `${what}: ${error.message}` })
    case "dtype":
      return new DTypeError({ message: `${what}: ${error.message}` })
    case "timeout":
      return new TimeoutError({
        message: `${what}: gloo gave up after ${timeoutMs} ms (${error.message}); a gloo timeout poisons the whole group: ${RECREATE}`,
        timeoutMs,
      })
    case "broken":
      return new TransferError({ message: `${what}: the group is broken after an earlier failure (${error.message}): ${RECREATE}`, transport: TRANSPORT })
    case "io":
      return new TransferError({ message: `${what}: ${error.message} (the peer died or its connection broke): ${RECREATE}`, transport: TRANSPORT })
    default:
      // "closed", "aborted", "usage": the message says it all.
      return new TransferError({ message: `${what}: ${error.message}`, transport: TRANSPORT })
  }
}
