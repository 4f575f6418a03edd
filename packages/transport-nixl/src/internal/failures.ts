/** Turns the addon's failures into typed tensorlane errors (core's nativeError). */
import { nativeError } from "@tensorlane/core/native"
import { FIX_LIBRARY, LIBRARY } from "../Loader.js"

export const TRANSPORT = "nixl"

/** `what` names the operation ("fetch of driver.3 from Worker-0"). */
export const toTensorlaneError = (error: unknown, what: string): Error =>
  nativeError(error, what, { transport: TRANSPORT, library: { library: LIBRARY, fix: FIX_LIBRARY } })
