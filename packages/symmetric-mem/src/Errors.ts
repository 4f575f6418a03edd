/**
 * The errors of @tensorlane/symmetric-mem (Schema.TaggedErrors; their `_tag`s are the contract of
 * the Effect face). Heap exhaustion is core's OutOfMemoryError, a malformed peer descriptor core's
 * ProtocolError, a missing native library core's NativeLibraryError.
 */
import { registerErrorClasses } from "@tensorlane/core/plugin"
import * as Schema from "effect/Schema"

/**
 * The ranks of a collective symmetric call disagree; raised on every rank. `what`: "size" (sizes
 * differ without makeSymmetric), "order" (the ranks are at different calls, or free other
 * allocations), "heap" (their heaps are not the same one), "options" (makeSymmetric or
 * skipSymmetricCheck differs), "peer" (another rank refused the call).
 */
export class SymmetricMismatchError extends Schema.TaggedError<SymmetricMismatchError>()("SymmetricMismatchError", {
  message: Schema.String,
  group: Schema.String,
  what: Schema.Literals(["size", "order", "heap", "options", "peer"]),
}) {}

/**
 * freeSymmetric or peerTensor of a tensor it cannot take: `reason` "double-free" (freed already),
 * "foreign" (not allocated by allocateSymmetric in this process), "view" (a view of a symmetric
 * tensor, or a peer's tensor, instead of the tensor allocateSymmetric returned), "group-gone" (its
 * group was destroyed), "exported" (an object not yet released still exports the block's bytes
 * for consumers to read in place, over the shm transport).
 */
export class SymmetricFreeError extends Schema.TaggedError<SymmetricFreeError>()("SymmetricFreeError", {
  message: Schema.String,
  reason: Schema.Literals(["double-free", "foreign", "view", "group-gone", "exported"]),
}) {}

/**
 * A backend that cannot serve the call: `reason` "needs-package" (a backend provided by a package
 * that is not installed), "not-initialized" (NVSHMEM's init failed or never ran: no allocation is
 * attempted, since NVSHMEM would exit the process), "wrong-group" (the group cannot carry this
 * backend), "unsupported" (an operation the backend lacks).
 */
export class SymmetricBackendError extends Schema.TaggedError<SymmetricBackendError>()("SymmetricBackendError", {
  message: Schema.String,
  backend: Schema.String,
  reason: Schema.Literals(["needs-package", "not-initialized", "wrong-group", "unsupported"]),
}) {}

// Every process that imports this package rebuilds these from the wire as their own class.
registerErrorClasses(SymmetricMismatchError, SymmetricFreeError, SymmetricBackendError)
