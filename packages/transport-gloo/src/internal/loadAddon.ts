/**
 * Finds and loads the native addon on first use, so that importing the transport never fails on a
 * machine without libgloo; a failure says which library is missing, where we looked and what to run.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { NativeLibraryError } from "@tensorlane/core"
import type { GlooAddon } from "../AddonTypes.js"

const ADDON_FILE = "tensorlane_gloo.node"
const PACKAGE = "@tensorlane/transport-gloo"
const FIX_ADDON = `npm run build:native -w ${PACKAGE} (needs libgloo-dev: sudo apt-get install libgloo-dev), or bash tools/setup.sh`
const FIX_LIBRARY = `sudo apt-get install libgloo-dev, then npm run build:native -w ${PACKAGE} (or bash tools/setup.sh)`

const require = createRequire(import.meta.url)

/** The package folder: this code runs from src/internal (tests) or bundled into dist/ (built). */
const packageRoot = (): string => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, "package.json")
    if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, "utf8")).name === PACKAGE) return dir
    const parent = dirname(dir)
    if (parent === dir) return dirname(dirname(fileURLToPath(import.meta.url)))
    dir = parent
  }
}

/** Where the addon may be, in the order tried: TENSORLANE_GLOO_ADDON, then cmake-js's Release and Debug outputs. */
export const addonCandidates = (): ReadonlyArray<string> => {
  const root = packageRoot()
  const override = process.env.TENSORLANE_GLOO_ADDON
  return [
    ...(override !== undefined && override !== "" ? [override] : []),
    join(root, "build", "Release", ADDON_FILE),
    join(root, "build", "Debug", ADDON_FILE),
  ]
}

let loaded: { readonly addon: GlooAddon; readonly path: string } | undefined

/** The addon and the file it came from; NativeLibraryError when it cannot be loaded. */
export const loadAddon = (): { readonly addon: GlooAddon; readonly path: string } => {
  if (loaded !== undefined) return loaded
  const tried = addonCandidates()
  const present = tried.filter((path) => fs.existsSync(path))
  if (present.length === 0) {
    throw new NativeLibraryError({
      message: `the gloo addon is not built: no ${ADDON_FILE} at ${tried.join(", ")}. Build it: ${FIX_ADDON}`,
      library: ADDON_FILE,
      tried,
      fix: FIX_ADDON,
    })
  }
  const failures: Array<string> = []
  for (const path of present) {
    try {
      loaded = { addon: require(path) as GlooAddon, path }
      return loaded
    } catch (error) {
      failures.push(`${path}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  // dlopen names the shared object it could not find; anything else is a broken or foreign build.
  if (failures.some((f) => f.includes("libgloo.so"))) {
    throw new NativeLibraryError({
      message: `libgloo.so.0 (Gloo, Debian package libgloo0 from libgloo-dev) cannot be loaded by the gloo addon: ${failures.join("; ")}. Fix: ${FIX_LIBRARY}`,
      library: "libgloo.so.0",
      tried: present,
      fix: FIX_LIBRARY,
    })
  }
  throw new NativeLibraryError({
    message: `the gloo addon cannot be loaded: ${failures.join("; ")}. Rebuild it: ${FIX_ADDON}`,
    library: ADDON_FILE,
    tried: present,
    fix: FIX_ADDON,
  })
}

/** The libgloo this process mapped (after loadAddon), for diagnostics. */
export const mappedGlooLibrary = (): string | undefined => {
  try {
    const line = fs
      .readFileSync("/proc/self/maps", "utf8")
      .split("\n")
      .find((l) => /\/libgloo\.so/.test(l))
    return line?.slice(line.indexOf("/"))
  } catch {
    return undefined
  }
}
