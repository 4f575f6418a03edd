/** What `tensorlane doctor` reports about Gloo: the addon and libgloo this process loaded (core's PackageStatus contract). */
import type { PackageStatus } from "@tensorlane/core/native"
import { addon, mappedGlooLibrary } from "./Loader.js"

export interface GlooStatus extends PackageStatus {
  /** The addon file that loaded. */
  readonly addon: string
  /** The libgloo the process mapped (Debian: /usr/lib/libgloo.so.0.5.0). */
  readonly library: string | undefined
  readonly glooVersion: string
}

/** Loads the addon if needed (NativeLibraryError, with every path tried and the fix, when it cannot) and describes it. */
export const glooStatus = (): GlooStatus => {
  const loaded = addon.load()
  const library = mappedGlooLibrary()
  return {
    addon: loaded.path,
    library,
    glooVersion: loaded.addon.glooVersion,
    details: [
      ["gloo", `${loaded.addon.glooVersion} at ${library ?? "(not mapped)"}`],
      ["addon", loaded.path],
    ],
  }
}
