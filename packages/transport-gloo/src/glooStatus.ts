/** What `tensorlane doctor` reports about Gloo: whether the addon and libgloo load, and from where. */
import { addonCandidates, loadAddon, mappedGlooLibrary } from "./internal/loadAddon.js"

export interface GlooStatus {
  readonly ready: boolean
  /** The addon file that loaded, or the candidates that were tried. */
  readonly addon: string | ReadonlyArray<string>
  /** The libgloo the process mapped (Debian: /usr/lib/libgloo.so.0.5.0). */
  readonly library: string | undefined
  readonly glooVersion: string | undefined
  /** Why it is not ready, with the fix. */
  readonly error: string | undefined
}

export const glooStatus = (): GlooStatus => {
  try {
    const { addon, path } = loadAddon()
    return { ready: true, addon: path, library: mappedGlooLibrary(), glooVersion: addon.glooVersion, error: undefined }
  } catch (error) {
    return {
      ready: false,
      addon: addonCandidates(),
      library: undefined,
      glooVersion: undefined,
      error: error instanceof Error ? error.message : String(error),
    }
  }
}
