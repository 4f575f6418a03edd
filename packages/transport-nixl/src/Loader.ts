/**
 * Finds and loads the native addon and NIXL's C API on first use, so that importing the transport
 * never fails on a machine without NIXL; a failure says what is missing, every place that was
 * tried, and what to run.
 *
 * libnixl_capi.so is searched in this order: $NIXL_LIB_DIR; <repo>/.tools/nixl (where
 * scripts/install-wheel.sh, called by tools/setup.sh, puts the nixl-cu12 wheel), looked for in
 * every ancestor of this package and of the working directory; Python's site-packages (a
 * `pip install nixl-cu12` or nixl-cu13); then the system library path (dlopen by bare name).
 * NIXL_PLUGIN_DIR, when set, is read by libnixl itself; by default it finds plugins/ next to it.
 */
import { join } from "node:path"
import { type NativeLibrarySpec, libraryCandidates as candidatesOf, loadNativeLibrary, nativeAddon } from "@tensorlane/core/native"
import type { NixlAddon } from "./AddonTypes.js"
import { nixlSettings } from "./internal/settings.js"

export const LIBRARY = "libnixl_capi.so"
export const PACKAGE = "@tensorlane/transport-nixl"
const WHEEL = "nixl-cu12==1.5.1"
export const FIX_LIBRARY = `bash tools/setup.sh (it runs packages/transport-nixl/scripts/install-wheel.sh), or python3 -m pip install --no-deps --target <repo>/.tools/nixl ${WHEEL}, or point NIXL_LIB_DIR at the folder holding ${LIBRARY}`

const addon = nativeAddon<NixlAddon>({ packageName: PACKAGE, moduleUrl: import.meta.url, name: "nixl" })

const librarySpec: NativeLibrarySpec = {
  library: LIBRARY,
  description: `NIXL's C API (${LIBRARY}, from the ${WHEEL} wheel)`,
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  override: { env: "NIXL_LIB_DIR", names: "folder" },
  toolDir: "nixl",
  // The wheels' folders that hold the library, relative to their install target.
  wheelPaths: [join(".nixl_cu12.mesonpy.libs", LIBRARY), join(".nixl_cu13.mesonpy.libs", LIBRARY)],
  systemNames: [LIBRARY],
  fix: FIX_LIBRARY,
}

/** Candidate paths of libnixl_capi.so, in search order; the last entry is the bare name. */
export const libraryCandidates = (): ReadonlyArray<string> => candidatesOf(librarySpec)

let loaded: { readonly addon: NixlAddon; readonly library: string } | undefined

/**
 * The addon with NIXL's library loaded in this process (by this thread or another one: the
 * library and its agent are process-wide); NativeLibraryError when either cannot be loaded.
 */
export const loadNixl = (): { readonly addon: NixlAddon; readonly library: string } => {
  if (loaded !== undefined) return loaded
  const native = addon.load().addon
  const already = native.loadedLibrary()
  if (already !== undefined) return (loaded = { addon: native, library: already })
  const settings = nixlSettings()
  const options = { env: settings.env, backendParams: settings.backendParams, progressDelayUs: settings.progressDelayUs }
  const { path } = loadNativeLibrary(librarySpec, (library) => native.load({ library, ...options }))
  return (loaded = { addon: native, library: path })
}

/** The addon, if NIXL is already loaded in this process (by any thread); never loads anything. */
export const loadedNixl = (): NixlAddon | undefined => {
  if (loaded !== undefined) return loaded.addon
  let native: NixlAddon
  try {
    native = addon.load().addon
  } catch {
    return undefined
  }
  const library = native.loadedLibrary()
  if (library === undefined) return undefined
  loaded = { addon: native, library }
  return native
}
