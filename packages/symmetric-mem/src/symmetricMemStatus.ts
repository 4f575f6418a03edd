/** What the package needs in this process, for diagnostics (`tensorlane doctor`; core's PackageStatus contract). */
import type { PackageStatus } from "@tensorlane/core/native"
import { addon } from "./Loader.js"
import { nvshmemStatus } from "./nvshmemStatus.js"

export interface SymmetricMemStatus extends PackageStatus {
  /** The addon file: the `shm` backend and transport need only it. */
  readonly addon: string
  /** NVSHMEM's host library for the `nvshmem` backend ("version at path"), or why it is unavailable. */
  readonly nvshmem: string
}

/** Loads the addon (NativeLibraryError when it cannot: then `shm` is unavailable) and says whether NVSHMEM loads. */
export const symmetricMemStatus = (): SymmetricMemStatus => {
  const { path } = addon.load()
  let nvshmem: string
  try {
    const status = nvshmemStatus()
    nvshmem = `${status.version} at ${status.library}`
  } catch (error) {
    nvshmem = `unavailable: ${error instanceof Error ? error.message : String(error)}`
  }
  return {
    addon: path,
    nvshmem,
    details: [
      ["addon", path],
      ["nvshmem", nvshmem],
    ],
  }
}
