/**
 * What the native addons throw or reject with (the kit's tensorlane::Failure: an Error with a
 * `code`, native-kit/tensorlane/Failure.h), and the typed tensorlane error each code becomes: one
 * meaning per code for every addon. A package words a code its own way through `wording`.
 */
import {
  DTypeError,
  InvalidSettingError,
  NativeLibraryError,
  ProtocolError,
  ShapeError,
  TimeoutError,
  TransferError,
  UnsupportedOperationError,
} from "./Errors.js"
import { type NativeLibrarySpec, libraryFix } from "./NativeAddon.js"

/** The kinds of failure every addon shares (tensorlane::FailureCode, in lowercase). */
export type NativeFailureCode =
  | "usage"
  | "protocol"
  | "setting"
  | "library"
  | "system"
  | "io"
  | "timeout"
  | "aborted"
  | "broken"
  | "closed"
  | "dtype"
  | "shape"
  | "transfer"
  | "registration"
  | "nodevice"
  | "version"
  | "nccl"
  | "cuda"

export interface NativeFailure extends Error {
  readonly code: NativeFailureCode
  /** Of a "setting" failure: the variable, its value, and what it accepts. */
  readonly variable?: string
  readonly value?: string
  readonly accepts?: string
}

export const isNativeFailure = (error: unknown): error is NativeFailure =>
  error instanceof Error && typeof (error as Partial<NativeFailure>).code === "string"

/** What a package's failures need besides the failure itself. */
export interface FailureContext {
  /** The transport's name, for TransferError. */
  readonly transport: string
  /** The runtime library the addon opens (for "library" failures), if it opens one. */
  readonly library?: NativeLibrarySpec
  /** The limit the operation ran under, for "timeout" failures. */
  readonly timeoutMs?: number
}

/** A package's own error for a failure (`message` is "<what>: <the failure's message>"); undefined for the shared one. */
export type FailureWording = (failure: NativeFailure, message: string) => Error | undefined

/**
 * The typed error for what a native call threw or rejected with; `what` names the operation
 * ("fetch of driver.3 from Worker-0"). Errors that are no addon failure pass through (non-errors
 * become a TransferError).
 */
export const nativeError = (error: unknown, what: string, context: FailureContext, wording?: FailureWording): Error => {
  if (!isNativeFailure(error)) {
    return error instanceof Error ? error : new TransferError({ message: `${what}: ${String(error)}`, transport: context.transport })
  }
  const message = `${what}: ${error.message}`
  const worded = wording?.(error, message)
  if (worded !== undefined) return worded
  switch (error.code) {
    case "usage":
      return new UnsupportedOperationError({ message })
    case "protocol":
      return new ProtocolError({ message })
    case "setting":
      return new InvalidSettingError({ message, variable: error.variable ?? "", value: error.value ?? "", accepts: error.accepts ?? "" })
    case "library":
      return context.library !== undefined
        ? new NativeLibraryError({ message, library: context.library.library, tried: [], fix: libraryFix(context.library) })
        : new TransferError({ message, transport: context.transport })
    case "timeout":
      return new TimeoutError({ message, timeoutMs: context.timeoutMs ?? 0 })
    case "dtype":
      return new DTypeError({ message })
    case "shape":
      return new ShapeError({ message })
    default:
      return new TransferError({ message, transport: context.transport })
  }
}
