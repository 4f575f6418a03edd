/** What NVSHMEM looks like in this process, for diagnostics (`tensorlane doctor`) and tests. */
import { loadNvshmem } from "./internal/loadAddon.js"

export interface NvshmemStatus {
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
  return { library, version: addon.nvshmemVersion(), initStatus: addon.nvshmemStatus() }
}
