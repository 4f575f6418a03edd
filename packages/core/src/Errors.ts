/**
 * Every error tensorlane raises, as `Schema.TaggedError`s. Their `_tag`s are the contract of the
 * Effect face; the Promise face rejects with the same objects.
 */
import * as Schema from "effect/Schema"

/** A dtype name that tensorlane does not know, or an operation a dtype does not support. */
export class DTypeError extends Schema.TaggedError<DTypeError>()("DTypeError", {
  message: Schema.String,
}) {}

/** Shapes, strides, indices or byte lengths that do not fit together. */
export class ShapeError extends Schema.TaggedError<ShapeError>()("ShapeError", {
  message: Schema.String,
}) {}

/** A tensor on a device that the operation or transport cannot handle. */
export class DeviceError extends Schema.TaggedError<DeviceError>()("DeviceError", {
  message: Schema.String,
  device: Schema.String,
  transport: Schema.optional(Schema.String),
}) {}

/** A pool or allocator could not satisfy an allocation. */
export class OutOfMemoryError extends Schema.TaggedError<OutOfMemoryError>()("OutOfMemoryError", {
  message: Schema.String,
  requested: Schema.Number,
  capacity: Schema.Number,
}) {}

/** A transport name that no loaded transport module registered. */
export class UnknownTransportError extends Schema.TaggedError<UnknownTransportError>()("UnknownTransportError", {
  message: Schema.String,
  transport: Schema.String,
  registered: Schema.Array(Schema.String),
}) {}

/** A transport module that could not be imported or does not export a transport. */
export class TransportLoadError extends Schema.TaggedError<TransportLoadError>()("TransportLoadError", {
  message: Schema.String,
  specifier: Schema.String,
}) {}

/** A two-sided transfer between actors that share no collective group of that backend. */
export class MissingGroupError extends Schema.TaggedError<MissingGroupError>()("MissingGroupError", {
  message: Schema.String,
  backend: Schema.String,
}) {}

/** A second group of one backend for a pair of actors, or a group name already in use. */
export class GroupConflictError extends Schema.TaggedError<GroupConflictError>()("GroupConflictError", {
  message: Schema.String,
  backend: Schema.String,
}) {}

/** An operation that the transport or the calling process does not support (put with gloo, get in an actor of a group it is not in, ...). */
export class UnsupportedOperationError extends Schema.TaggedError<UnsupportedOperationError>()(
  "UnsupportedOperationError",
  { message: Schema.String },
) {}

/** An in-actor API (`put`, `get`, `waitTensorFreed`, `group`) called outside an actor method. */
export class NotInActorError extends Schema.TaggedError<NotInActorError>()("NotInActorError", {
  message: Schema.String,
}) {}

/** A user method threw. Carries the remote name, message and stack. */
export class ApplicationError extends Schema.TaggedError<ApplicationError>()("ApplicationError", {
  message: Schema.String,
  remoteName: Schema.String,
  remoteStack: Schema.String,
  actor: Schema.String,
  method: Schema.String,
}) {}

/** The process of an actor died or became unreachable; calls that depended on it fail with this. */
export class ActorDiedError extends Schema.TaggedError<ActorDiedError>()("ActorDiedError", {
  message: Schema.String,
  actor: Schema.String,
}) {}

/** A host's node runs as many actors as its `maxActors` (cluster config) allows: a spawn there is refused. */
export class ActorLimitError extends Schema.TaggedError<ActorLimitError>()("ActorLimitError", {
  message: Schema.String,
  host: Schema.String,
  limit: Schema.Number,
}) {}

/** A get, transfer or wait did not complete in time. */
export class TimeoutError extends Schema.TaggedError<TimeoutError>()("TimeoutError", {
  message: Schema.String,
  timeoutMs: Schema.Number,
}) {}

/** A transfer failed for a system reason (peer gone, connection reset, native failure). */
export class TransferError extends Schema.TaggedError<TransferError>()("TransferError", {
  message: Schema.String,
  transport: Schema.String,
}) {}

/**
 * A frame or metadata blob from a peer that does not decode, or names objects that do not exist; or
 * a host's node and a driver of releases whose messages differ (a spawn there is refused).
 */
export class ProtocolError extends Schema.TaggedError<ProtocolError>()("ProtocolError", {
  message: Schema.String,
}) {}

/** A ref that was released, or an object whose owner already freed it. */
export class ObjectFreedError extends Schema.TaggedError<ObjectFreedError>()("ObjectFreedError", {
  message: Schema.String,
  objectId: Schema.String,
}) {}

/** The cluster is shut down (also when a ref or handle of a shut-down cluster is used). */
export class ClusterClosedError extends Schema.TaggedError<ClusterClosedError>()("ClusterClosedError", {
  message: Schema.String,
}) {}

/** An argument of a tensorlane call that is not what it accepts (a count, a timeout, a ref, a value that cannot travel). */
export class InvalidArgumentError extends Schema.TaggedError<InvalidArgumentError>()("InvalidArgumentError", {
  message: Schema.String,
  argument: Schema.String,
}) {}

/** A ref or actor handle used with a cluster other than the one that made it. */
export class WrongClusterError extends Schema.TaggedError<WrongClusterError>()("WrongClusterError", {
  message: Schema.String,
}) {}

/** A control message (arguments, a result, an error) over the control plane's size limit; only that call fails. */
export class MessageTooLargeError extends Schema.TaggedError<MessageTooLargeError>()("MessageTooLargeError", {
  message: Schema.String,
  bytes: Schema.Number,
  limit: Schema.Number,
}) {}

/** A call cancelled with `cluster.cancel(ref)` before or while it ran. */
export class CancelledError extends Schema.TaggedError<CancelledError>()("CancelledError", {
  message: Schema.String,
  objectId: Schema.String,
}) {}

/** A native library that is not installed or cannot be loaded; lists every place that was tried. */
export class NativeLibraryError extends Schema.TaggedError<NativeLibraryError>()("NativeLibraryError", {
  message: Schema.String,
  library: Schema.String,
  tried: Schema.Array(Schema.String),
  fix: Schema.String,
}) {}

/**
 * An environment setting (TENSORLANE_*, NIXL_LIB_DIR, ...) whose value it does not accept: names the
 * variable, the value, and what it accepts (docs/configuration.md lists every setting).
 */
export class InvalidSettingError extends Schema.TaggedError<InvalidSettingError>()("InvalidSettingError", {
  message: Schema.String,
  variable: Schema.String,
  value: Schema.String,
  accepts: Schema.String,
}) {}

/** A cluster config (cluster.json) or a file it names that is missing, unreadable or not what it must be. */
export class ClusterConfigError extends Schema.TaggedError<ClusterConfigError>()("ClusterConfigError", {
  message: Schema.String,
  path: Schema.String,
}) {}

/**
 * A host's node that could not start: its address and port, or its engine's (the port after it),
 * taken or not this machine's, or the cluster's Postgres unreachable or refusing the cluster's role.
 * Says what it tried and what to do.
 */
export class NodeStartError extends Schema.TaggedError<NodeStartError>()("NodeStartError", {
  message: Schema.String,
  host: Schema.String,
}) {}

/**
 * A certificate or key of a cluster that is missing, unreadable, malformed, not signed by the
 * cluster's CA, outside its dates, or not naming `identity`; or a peer presenting such a certificate.
 */
export class CertificateError extends Schema.TaggedError<CertificateError>()("CertificateError", {
  message: Schema.String,
  path: Schema.String,
  identity: Schema.String,
}) {}

/**
 * A transport that moves bytes within one machine only (shm, symmetric memory) asked to move them
 * between two hosts of a cluster across hosts; names both ("driver" for the driver's machine).
 */
export class CrossHostError extends Schema.TaggedError<CrossHostError>()("CrossHostError", {
  message: Schema.String,
  transport: Schema.String,
  hosts: Schema.Array(Schema.String),
}) {}

/**
 * An object whose bytes were on a host of a cluster across hosts that died or was cut off: its
 * producer is gone with the host (calls on the producer fail with ActorDiedError).
 */
export class ObjectLostError extends Schema.TaggedError<ObjectLostError>()("ObjectLostError", {
  message: Schema.String,
  objectId: Schema.String,
  host: Schema.String,
}) {}

/** A typed error (a `Schema.TaggedError`): core's, or a package's own. */
export interface TaggedError extends Error {
  readonly _tag: string
}

/**
 * A typed error of a package that extends tensorlane (transport-nccl's NcclError, symmetric-mem's
 * SymmetricFreeError, ...). Registered with `registerErrorClasses`, it keeps its class across
 * processes: the operations that run a transport or relay a remote failure may fail with it.
 */
export type PackageError = TaggedError

/** Every error of tensorlane's core. */
export type TensorlaneError =
  | DTypeError
  | ShapeError
  | DeviceError
  | OutOfMemoryError
  | UnknownTransportError
  | TransportLoadError
  | MissingGroupError
  | GroupConflictError
  | UnsupportedOperationError
  | NotInActorError
  | ApplicationError
  | ActorDiedError
  | ActorLimitError
  | TimeoutError
  | TransferError
  | ProtocolError
  | ObjectFreedError
  | ClusterClosedError
  | NativeLibraryError
  | InvalidArgumentError
  | InvalidSettingError
  | WrongClusterError
  | MessageTooLargeError
  | CancelledError
  | ClusterConfigError
  | CertificateError
  | CrossHostError
  | ObjectLostError
