/** Turns the addon's failures into typed tensorlane errors (core's nativeError). */
import { nativeError } from "@tensorlane/core/native"
import { nvshmemSpec } from "../Loader.js"

export const TRANSPORT = "shm"

/** `what` names the operation ("shm fetch of driver.3 from Worker-0"); only NVSHMEM is a library the addon loads. */
export const toTensorlaneError = (error: unknown, what: string): Error => nativeError(error, what, { transport: TRANSPORT, library: nvshmemSpec })
