/** What NIXL looks like in this process, for diagnostics (`tensorlane doctor`) and tests. */
import type { NativeRegistration } from "./AddonTypes.js"
import { loadNixl } from "./internal/loadAddon.js"

export interface NixlStatus {
  /** The libnixl_capi.so this process loaded. */
  readonly library: string
  /** This process's NIXL agent, once a registration or fetch created it. */
  readonly agent: string | undefined
  readonly registrations: ReadonlyArray<NativeRegistration>
}

/** Loads NIXL if needed (NativeLibraryError when it cannot) and describes it. */
export const nixlStatus = (): NixlStatus => {
  const { addon, library } = loadNixl()
  return { library, agent: addon.agentName(), registrations: addon.registrations() }
}
