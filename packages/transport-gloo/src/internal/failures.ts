/** Turns the addon's failures into typed tensorlane errors that say what to do (core's nativeError, gloo's words). */
import { TimeoutError, TransferError } from "@tensorlane/core"
import { nativeError } from "@tensorlane/core/native"

export const TRANSPORT = "gloo"

const RECREATE = "destroy the group (group.destroy()) and create it again with cluster.createCollectiveGroup"

/**
 * `what` names the operation ("receive of 1.2 from rank 0 in group "g""); `timeoutMs` is the gloo
 * wait limit the operation ran with.
 */
export const toTensorlaneError = (error: unknown, what: string, timeoutMs: number): Error =>
  nativeError(error, what, { transport: TRANSPORT, timeoutMs }, (failure) => {
    switch (failure.code) {
      case "timeout":
        return new TimeoutError({
          message: `${what}: gloo gave up after ${timeoutMs} ms (${failure.message}); a gloo timeout poisons the whole group: ${RECREATE}`,
          timeoutMs,
        })
      case "broken":
        return new TransferError({ message: `${what}: the group is broken after an earlier failure (${failure.message}): ${RECREATE}`, transport: TRANSPORT })
      case "io":
        return new TransferError({ message: `${what}: ${failure.message} (the peer died or its connection broke): ${RECREATE}`, transport: TRANSPORT })
      default:
        return undefined
    }
  })
