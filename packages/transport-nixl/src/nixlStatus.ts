/** What NIXL looks like in this process, for diagnostics (`tensorlane doctor`) and tests (core's PackageStatus contract). */
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { type PackageStatus, readSetting, textSetting } from "@tensorlane/core/native"
import type { NativeRegistration } from "./AddonTypes.js"
import { loadNixl } from "./Loader.js"

export interface NixlStatus extends PackageStatus {
  /** The libnixl_capi.so this process loaded. */
  readonly library: string
  /** This process's NIXL agent, once the transport's prepare (in an actor), a registration or a fetch created it. */
  readonly agent: string | undefined
  readonly registrations: ReadonlyArray<NativeRegistration>
}

/** libnixl reads it itself, and without it finds plugins/ next to itself. */
const PLUGIN_DIR = textSetting("NIXL_PLUGIN_DIR", "the folder of NIXL's plugins")

/** The wheel's version, from the dist-info folder that sits next to its library folder. */
const wheelOf = (library: string): string | undefined => {
  if (!library.includes("/")) return undefined
  try {
    for (const name of fs.readdirSync(dirname(dirname(library)))) {
      const match = /^nixl_(cu\d+)-(.+)\.dist-info$/.exec(name)
      if (match !== null) return `nixl-${match[1]} ${match[2]}`
    }
    return undefined
  } catch {
    return undefined
  }
}

/** Loads NIXL if needed (NativeLibraryError when it cannot) and describes it. */
export const nixlStatus = (): NixlStatus => {
  const { addon, library } = loadNixl()
  const wheel = wheelOf(library)
  return {
    library,
    agent: addon.agentName(),
    registrations: addon.registrations(),
    details: [
      ["libnixl_capi", `${library}${wheel !== undefined ? ` (wheel ${wheel})` : ""}`],
      ["plugins", readSetting(PLUGIN_DIR) ?? join(dirname(library), "plugins")],
    ],
  }
}
