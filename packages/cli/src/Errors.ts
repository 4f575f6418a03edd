/** The errors of the tensorlane command. The command prints `<_tag>: <message>` and exits with 2. */
import * as Schema from "effect/Schema"

/** A command line the command cannot run: unknown command or option, a malformed size or count. */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", {
  message: Schema.String,
}) {}

/** A transport asked of `bench` that is unknown or not ready here; `doctor` says why. */
export class BenchTransportError extends Schema.TaggedError<BenchTransportError>()("BenchTransportError", {
  message: Schema.String,
  transport: Schema.String,
}) {}

/** `tensorlane build` could not build an addon: what this machine lacks (each with its fix), or the compiler's failure. */
export class BuildError extends Schema.TaggedError<BuildError>()("BuildError", {
  message: Schema.String,
  missing: Schema.Array(Schema.String),
}) {}

/** `tensorlane install` could not download a wheel: the network failed, the server refused, the URL is not https, or no byte came for too long. */
export class DownloadError extends Schema.TaggedError<DownloadError>()("DownloadError", {
  message: Schema.String,
  url: Schema.String,
}) {}

/** A downloaded wheel is not the pinned file: its sha256 or its size differs. Nothing was unpacked. */
export class WheelHashError extends Schema.TaggedError<WheelHashError>()("WheelHashError", {
  message: Schema.String,
  url: Schema.String,
  expected: Schema.String,
  actual: Schema.String,
}) {}

/**
 * A wheel that is not unpacked: an entry path that would leave the target (`..`, absolute), a
 * symlink, an entry or a total over the limits, too many entries, a malformed or unsupported zip,
 * or a layout without the libraries the pin names. Nothing was unpacked.
 */
export class UnsafeWheelError extends Schema.TaggedError<UnsafeWheelError>()("UnsafeWheelError", {
  message: Schema.String,
  wheel: Schema.String,
  entry: Schema.optional(Schema.String),
}) {}

/** The disk (or the user's quota) filled up while downloading or unpacking; what was written is removed. */
export class DiskFullError extends Schema.TaggedError<DiskFullError>()("DiskFullError", {
  message: Schema.String,
  path: Schema.String,
}) {}

/** `tensorlane install <target>` needs the package that loads the target's libraries, which does not resolve from here. */
export class PackageMissingError extends Schema.TaggedError<PackageMissingError>()("PackageMissingError", {
  message: Schema.String,
  packageName: Schema.String,
}) {}
