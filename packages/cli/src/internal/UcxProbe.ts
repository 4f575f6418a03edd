/**
 * Run as a child process by `tensorlane doctor` with UCX_LOG_LEVEL=debug: registers one small tensor
 * with NIXL, which creates this process's agent and its UCX context, so that UCX logs the transports
 * and devices it found. The parent reads that log (UcxReport.ts); a child keeps the debug log and
 * the process-wide NIXL agent out of the doctor's own process.
 */
import { Tensor } from "@tensorlane/core"
import { deregisterNixlMemory, registerNixlMemory } from "@tensorlane/transport-nixl"

const tensor = Tensor.zeros([1024])
registerNixlMemory(tensor)
deregisterNixlMemory(tensor)
// UCX's threads are not joined by NIXL on exit; the log is complete once the registration returned.
process.exit(0)
