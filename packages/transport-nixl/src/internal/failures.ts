/** Turns the addon's failures into typed tensorlane errors (core's nativeError). */
import { nativeError } from "@tensorlane/core/native"
import { librarySpec } from "../Loader.js"

export const TRANSPORT = "nixl"

/** `what` names the operation ("fetch of driver.3 from Worker-0"). */
export const toTensorlaneError = (error: unknown, what: string): Error =>
  nativeError(error, what, { transport: TRANSPORT, library: librarySpec })
