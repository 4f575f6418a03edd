export { gloo, gloo as default, reducibleDTypes } from "./GlooTransport.js"
export { glooStatus, type GlooStatus } from "./glooStatus.js"
export { loadAddon as loadGlooAddon } from "./internal/loadAddon.js"
export type { GlooAddon, NativeFailure, NativeFailureCode, NativeGroup, NativeOperation } from "./AddonTypes.js"
