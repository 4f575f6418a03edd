/** What NCCL and CUDA look like in this process, for diagnostics (`tensorlane doctor`) and tests (core's PackageStatus contract). */
import type { PackageStatus } from "@tensorlane/core/native"
import type { NativeCommunicator, NativeDevices } from "./AddonTypes.js"
import { type NcclFeature, featureTable, formatNcclVersion } from "./NcclVersion.js"
import { loadCuda } from "./Loader.js"

export interface NcclStatus extends PackageStatus {
  /** The libnccl.so.2 this process loaded, and its version ("2.28.9"). */
  readonly library: string
  readonly version: string
  readonly versionCode: number
  /** Which features the loaded NCCL has (registration, windows, float8, ...). */
  readonly features: { readonly [F in NcclFeature]: boolean }
  /** The CUDA runtime this process loaded. */
  readonly cudart: string
  /** What the CUDA runtime sees: no driver gives driverVersion 0 and count 0. */
  readonly devices: NativeDevices
  /** This process's communicators, one per nccl group it is in. */
  readonly communicators: ReadonlyArray<NativeCommunicator>
}

/** Loads NCCL and the CUDA runtime if needed (NativeLibraryError when they cannot be) and describes them. */
export const ncclStatus = (): NcclStatus => {
  const { addon, library, version, cudart } = loadCuda()
  const devices = addon.probeDevices()
  return {
    library,
    version: formatNcclVersion(version),
    versionCode: version.code,
    features: featureTable(version),
    cudart,
    devices,
    communicators: addon.communicators(),
    details: [
      ["nccl", `${formatNcclVersion(version)} at ${library}`],
      ["cudart", cudart],
      ["devices", devices.error !== undefined ? `${devices.count} (${devices.error})` : String(devices.count)],
    ],
  }
}
