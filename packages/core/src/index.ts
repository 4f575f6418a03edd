export * from "./Errors.js"
export * from "./Device.js"
export * from "./DType.js"
export * from "./Allocator.js"
export * from "./AllocatorScope.js"
export * from "./CpuMemory.js"
export { BlockAllocator, type Block } from "./BlockAllocator.js"
export * from "./Tensor.js"
export { checkShape, numelOf } from "./internal/layout.js"
export { ObjectRef, isObjectRef, type RefTracker } from "./ObjectRef.js"
export {
  defineActor,
  method,
  isActorDefinition,
  type ActorDefinition,
  type ActorHandle,
  type ActorMethod,
  type ActorSpec,
  type CallOptions,
  type InitContext,
  type MarkedMethod,
  type MethodOptions,
  type Refable,
} from "./Actor.js"
export {
  Cluster,
  start,
  type ClusterInspection,
  type CollectiveGroup,
  type GroupOptions,
  type SpawnOptions,
  type StartOptions,
} from "./Cluster.js"
export {
  put,
  get,
  waitTensorFreed,
  group,
  cancellationSignal,
  currentActorId,
  type GetOptions,
  type GroupMember,
  type PutOptions,
  type WaitTensorFreedOptions,
} from "./InActor.js"
export * from "./Transport.js"
export { registerErrorClasses } from "./internal/wireError.js"
export { MAX_MESSAGE_BYTES } from "./internal/frame.js"
export {
  addonCandidates,
  libraryCandidates,
  loadNativeLibrary,
  packageRootOf,
  requireNativeAddon,
  type NativeAddonSpec,
  type NativeLibrarySpec,
} from "./NativeAddon.js"
export { TensorStore, type StoredObject } from "./TensorStore.js"
export { recordTransfer, transferBytes, transferCount, transferLatency, transferSpanName, type TransferStat } from "./Metrics.js"
export * as TensorlaneCluster from "./TensorlaneCluster.js"
