/**
 * `@tensorlane/core/plugin`: what a package that extends tensorlane builds on (a transport, an
 * allocator or memory pool), apart from the user API of `@tensorlane/core`. A native addon's loader,
 * failures and settings are `@tensorlane/core/native`.
 */
export * from "./Transport.js"
export { attempt } from "./internal/attempt.js"
export type { DeviceAllocatorFactory } from "./Allocator.js"
export { currentAllocator, nextStorageId, registerDeviceAllocator } from "./AllocatorScope.js"
export { BlockAllocator, type Block } from "./BlockAllocator.js"
export { checkShape, numelOf } from "./internal/layout.js"
export { registerErrorClasses } from "./internal/wireError.js"
export {
  agreeOnOutcome,
  gatherJson,
  messageOf,
  runAgreed,
  runLockstep,
  type AgreementFailure,
  type AgreementGroup,
  type AgreementOptions,
  type Collective,
  type LocalFailure,
  type Step,
} from "./Agreement.js"
