/**
 * The one contract of every native package's status function (`glooStatus()`, `nixlStatus()`,
 * `ncclStatus()`, `symmetricMemStatus()`, `nvshmemStatus()`): synchronous; it loads what it
 * describes in this process, throws NativeLibraryError (every path tried, and the fix) when that
 * cannot be loaded, and otherwise returns the package's facts, among them `details`: what
 * `tensorlane doctor` prints, in order.
 */
export interface PackageStatus {
  /** Label and value: the libraries loaded and from where, their versions, the addon file. */
  readonly details: ReadonlyArray<readonly [label: string, value: string]>
}
