export { nixl, nixl as default } from "./NixlTransport.js"
export { registerNixlMemory, deregisterNixlMemory, nixlRegistrationRefs } from "./registerNixlMemory.js"
export { createNixlMemoryPool, type NixlMemoryPool } from "./NixlMemoryPool.js"
export { nixlStatus, type NixlStatus } from "./nixlStatus.js"
export * as NixlEffect from "./NixlEffect.js"
export { loadNixl, libraryCandidates, runtimeWheels } from "./Loader.js"
export type { DeviceMemoryHandle, NixlMetadata } from "./AddonTypes.js"
export type {
  DeclaredRegion,
  MemoryKind,
  NativeMemory,
  NativeOperation,
  NativeRegistration,
  NixlAddon,
  ReadRequest,
  RegionKey,
  RemoteLayout,
} from "./AddonTypes.js"
export type { NativeFailure, NativeFailureCode } from "@tensorlane/core/native"
