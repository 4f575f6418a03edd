import type { NodeOptions, TensorlaneNode } from "./Node.js"

export * from "./Errors.js"
export * from "./Device.js"
export * from "./DType.js"
export type { AllocationFailure, Allocator, FreeFailure, MemoryPool, Storage } from "./Allocator.js"
export { cpuAllocator, createCpuMemoryPool, hostMemoryWarmCalls, type CpuMemoryPoolOptions } from "./CpuMemory.js"
export { withAllocator } from "./AllocatorScope.js"
/** The environment tensorlane starts an actor process with, from a parent's: for a tool that wants its own processes alike (the benchmark's limits). */
export { actorEnvironment } from "./internal/actorLaunch.js"
export * from "./Tensor.js"
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
  type HostInfo,
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
export type { ReduceOp } from "./Transport.js"
export { MAX_MESSAGE_BYTES } from "./Limits.js"
export { transferBytes, transferCount, transferLatency, transferSpanName, type TransferStat } from "./Metrics.js"
export {
  ClusterConfigFile,
  ClusterDriverEntry,
  ClusterHostEntry,
  MEMBER_KEY_USAGES,
  clusterConfigConflict,
  loadClusterConfig,
  tlsOptionsFor,
  type ClusterConfig,
  type ClusterDriver,
  type ClusterHost,
  type ClusterTls,
  type MemberCredentials,
} from "./ClusterConfig.js"
export type { NodeOptions, TensorlaneNode } from "./Node.js"
/**
 * Starts a host's node in this process. Its module, with the cluster engine's (Effect's cluster,
 * Postgres), loads here only: in every other process it would double the heap, and the cost of
 * each of its full collections with it.
 */
export const startNode = async (options: NodeOptions): Promise<TensorlaneNode> => (await import("./Node.js")).startNode(options)
export * as TensorlaneCluster from "./TensorlaneCluster.js"
export * as TensorlaneMemory from "./TensorlaneMemory.js"
