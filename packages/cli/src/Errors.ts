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
