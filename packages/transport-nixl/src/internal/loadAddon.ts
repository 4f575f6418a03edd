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
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { NativeLibraryError, type NativeAddonSpec, packageRootOf, requireNativeAddon } from "@tensorlane/core"
import type { NixlAddon } from "../AddonTypes.js"
import { nixlSettings } from "./settings.js"

const ADDON_FILE = "tensorlane_nixl.node"
const LIBRARY = "libnixl_capi.so"
const PACKAGE = "@tensorlane/transport-nixl"
const WHEEL = "nixl-cu12==1.5.1"
const FIX_ADDON = `npm run build:native -w ${PACKAGE}, or bash tools/setup.sh`
const FIX_LIBRARY = `bash tools/setup.sh (it runs packages/transport-nixl/scripts/install-wheel.sh), or python3 -m pip install --no-deps --target <repo>/.tools/nixl ${WHEEL}, or point NIXL_LIB_DIR at the folder holding ${LIBRARY}`
/** The wheels' folders that hold libnixl_capi.so, relative to their install target. */
const WHEEL_LIB_DIRS = [".nixl_cu12.mesonpy.libs", ".nixl_cu13.mesonpy.libs"]

const addonSpec: NativeAddonSpec = {
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  file: ADDON_FILE,
  overrideEnv: "TENSORLANE_NIXL_ADDON",
  fix: FIX_ADDON,
}

const ancestors = (start: string): Array<string> => {
  const out: Array<string> = []
  for (let dir = start; ; dir = dirname(dir)) {
    out.push(dir)
    if (dirname(dir) === dir) return out
  }
}

/** Site-packages folders of the python3 on PATH (a virtualenv's included); none without Python. */
const sitePackages = (): Array<string> => {
  try {
    const out = execFileSync(
      "python3",
      ["-c", "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))"],
      { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] },
    )
    return out.split("\n").filter((line) => line.length > 0)
  } catch {
    return []
  }
}

/** Candidate paths of libnixl_capi.so, in search order; the last entry is the bare name. */
export const libraryCandidates = (): ReadonlyArray<string> => {
  const out: Array<string> = []
  const libDir = process.env.NIXL_LIB_DIR
  if (libDir !== undefined && libDir !== "") out.push(join(libDir, LIBRARY))
  const roots = new Set([...ancestors(packageRootOf(import.meta.url, PACKAGE)), ...ancestors(process.cwd())])
  for (const root of roots) for (const dir of WHEEL_LIB_DIRS) out.push(join(root, ".tools", "nixl", dir, LIBRARY))
  for (const site of sitePackages()) for (const dir of WHEEL_LIB_DIRS) out.push(join(site, dir, LIBRARY))
  out.push(LIBRARY)
  return [...new Set(out)]
}

const requireAddon = (): { readonly addon: NixlAddon; readonly path: string } => requireNativeAddon<NixlAddon>(addonSpec)

let loaded: { readonly addon: NixlAddon; readonly library: string } | undefined

/**
 * The addon with NIXL's library loaded in this process (by this thread or another one: the
 * library and its agent are process-wide); NativeLibraryError when either cannot be loaded.
 */
export const loadNixl = (): { readonly addon: NixlAddon; readonly library: string } => {
  if (loaded !== undefined) return loaded
  const { addon } = requireAddon()
  const already = addon.loadedLibrary()
  if (already !== undefined) return (loaded = { addon, library: already })
  const settings = nixlSettings()
  const options = { env: settings.env, backendParams: settings.backendParams, progressDelayUs: settings.progressDelayUs }
  const candidates = libraryCandidates()
  const failures: Array<string> = []
  for (const path of candidates) {
    // Paths that do not exist are skipped without a dlopen; the bare name goes to the system's search.
    if (path.includes("/") && !fs.existsSync(path)) continue
    try {
      addon.load({ library: path, ...options })
      return (loaded = { addon, library: path })
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error))
    }
  }
  throw new NativeLibraryError({
    message: `NIXL's C API (${LIBRARY}, from the ${WHEEL} wheel) cannot be loaded. Tried: ${candidates.join(", ")}${
      failures.length > 0 ? ` (${failures.join("; ")})` : ""
    }. Fix: ${FIX_LIBRARY}`,
    library: LIBRARY,
    tried: candidates,
    fix: FIX_LIBRARY,
  })
}

/** The addon, if NIXL is already loaded in this process (by any thread); never loads anything. */
export const loadedNixl = (): NixlAddon | undefined => {
  if (loaded !== undefined) return loaded.addon
  let addon: NixlAddon
  try {
    addon = requireAddon().addon
  } catch {
    return undefined
  }
  const library = addon.loadedLibrary()
  if (library === undefined) return undefined
  loaded = { addon, library }
  return addon
}
