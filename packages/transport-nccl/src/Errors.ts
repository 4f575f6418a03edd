/**
 * The errors of transport-nccl, as `Schema.TaggedError`s next to core's (whose NativeLibraryError,
 * DeviceError, TimeoutError and TransferError it raises as well).
 */
import { registerErrorClasses } from "@tensorlane/core/plugin"
import * as Schema from "effect/Schema"

/** No NVIDIA driver, no CUDA device, or not the device asked for: CUDA memory and NCCL communicators need one. */
export class NoCudaDeviceError extends Schema.TaggedError<NoCudaDeviceError>()("NoCudaDeviceError", {
  message: Schema.String,
  /** The device asked for, e.g. "cuda:0". */
  device: Schema.String,
  /** cudaDriverGetVersion (0: no driver) and the visible device count, when the runtime could tell. */
  driverVersion: Schema.Number,
  deviceCount: Schema.Number,
}) {}

/** The loaded NCCL is too old for a feature (registration needs 2.19, windows 2.27.3, fp8 2.24). */
export class NcclVersionError extends Schema.TaggedError<NcclVersionError>()("NcclVersionError", {
  message: Schema.String,
  feature: Schema.String,
  required: Schema.String,
  found: Schema.String,
}) {}

/** NCCL or the CUDA runtime reported a failure (a broken communicator, a failed registration call). */
export class NcclError extends Schema.TaggedError<NcclError>()("NcclError", {
  message: Schema.String,
  operation: Schema.String,
}) {}

/**
 * Registering (or deregistering) a pool with a group failed on at least one rank. Every rank raises
 * it, after rolling back what the call did, so that all ranks stay in the same state.
 */
export class NcclRegistrationError extends Schema.TaggedError<NcclRegistrationError>()("NcclRegistrationError", {
  message: Schema.String,
  group: Schema.String,
  /** Ranks whose own registration failed (empty when the ranks disagreed on what to register). */
  failedRanks: Schema.Array(Schema.Number),
}) {}

export type NcclTransportError = NoCudaDeviceError | NcclVersionError | NcclError | NcclRegistrationError

// Every process that imports this package rebuilds these from the wire as their own class.
registerErrorClasses(NoCudaDeviceError, NcclVersionError, NcclError, NcclRegistrationError)
