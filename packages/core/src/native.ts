/**
 * `@tensorlane/core/native`: the TypeScript half of the kit that native packages share (the C++ half
 * is native-kit/, compiled into each addon): loading the addon and the runtime libraries it opens,
 * the typed error of each native failure, environment settings, and the status contract.
 */
export { tensorlaneCacheDir } from "./CacheDir.js"
export { CLI_COMMAND, nativeAddon, sourceBuildDir, type AddonOptions, type NativeAddon } from "./NativeAddon.js"
export { nativePackage, type NativePackage, type NativePackageOptions, type RuntimeLibraryOptions } from "./NativePackage.js"
export {
  CHECKOUT_LIBRARIES,
  libraryCacheDir,
  libraryCandidates,
  libraryFix,
  loadNativeLibrary,
  wheelFolder,
  type NativeLibrarySpec,
  type RuntimeWheel,
} from "./NativeAddon.js"
export {
  isNativeFailure,
  nativeError,
  type FailureContext,
  type FailureWording,
  type NativeFailure,
  type NativeFailureCode,
} from "./NativeFailure.js"
export { choiceSetting, integerSetting, readSetting, textSetting, timeoutSetting, type Setting } from "./Settings.js"
export type { PackageStatus } from "./PackageStatus.js"
