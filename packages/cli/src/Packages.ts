/**
 * The transport packages `tensorlane doctor` knows, as data: adding a package is one entry. Each is
 * an optional peer of the CLI, imported dynamically, so a missing package is reported, not a crash.
 */
export interface PackageEntry {
  readonly packageName: string
  /** The transport names the package registers, as `tensorTransport` and `backend` take them. */
  readonly transports: ReadonlyArray<string>
  /**
   * The export that describes the package's native side: core's PackageStatus contract (it throws
   * NativeLibraryError when something cannot load, and returns `details` otherwise).
   */
  readonly statusExport: string
  /** Needs a CUDA device: reported "no GPU" on a machine without one, left out of default benches. */
  readonly gpuOnly: boolean
  /** How to get the package and its native library. */
  readonly fix: string
}

export const PACKAGES: ReadonlyArray<PackageEntry> = [
  {
    packageName: "@tensorlane/transport-gloo",
    transports: ["gloo"],
    statusExport: "glooStatus",
    gpuOnly: false,
    fix: "npm install @tensorlane/transport-gloo, with Debian's libgloo-dev (bash tools/setup.sh in the repository)",
  },
  {
    packageName: "@tensorlane/transport-nixl",
    transports: ["nixl"],
    statusExport: "nixlStatus",
    gpuOnly: false,
    fix: "npm install @tensorlane/transport-nixl, then npx tensorlane install nixl",
  },
  {
    packageName: "@tensorlane/transport-nccl",
    transports: ["nccl"],
    statusExport: "ncclStatus",
    gpuOnly: true,
    fix: "npm install @tensorlane/transport-nccl, then npx tensorlane install nccl (and a CUDA driver)",
  },
  {
    packageName: "@tensorlane/symmetric-mem",
    transports: ["shm"],
    statusExport: "symmetricMemStatus",
    gpuOnly: false,
    fix: "npm install @tensorlane/symmetric-mem",
  },
]
