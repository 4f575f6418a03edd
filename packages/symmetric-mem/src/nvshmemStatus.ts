/** What NVSHMEM looks like in this process, for diagnostics and tests (core's PackageStatus contract). */
import type { PackageStatus } from "@tensorlane/core/native"
import { loadNvshmem } from "./Loader.js"

export interface NvshmemStatus extends PackageStatus {
  /** The libnvshmem_host.so.3 this process loaded. */
  readonly library: string
  /** "major.minor.patch" of that library. */
  readonly version: string
  /** nvshmemx_init_status(): 0 not initialized, 1 bootstrapped only, 2 initialized (allocations allowed). */
  readonly initStatus: number
}

/** Loads NVSHMEM's host library if needed (NativeLibraryError when it cannot) and describes it; initializes nothing. */
export const nvshmemStatus = (): NvshmemStatus => {
  const { addon, library } = loadNvshmem()
  const version = addon.nvshmemVersion()
  const initStatus = addon.nvshmemStatus()
  return {
    library,
    version,
    initStatus,
    details: [
      ["nvshmem", `${version} at ${library}`],
      ["init status", String(initStatus)],
    ],
  }
}
