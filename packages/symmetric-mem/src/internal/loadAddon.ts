/**
 * Loads the native addon on first use (importing the package never fails on a machine where it is
 * not built), and NVSHMEM's host library on demand. The addon is one shared object per process, so
 * the main thread and the transfer agent's worker thread see the same mapped segments.
 *
 * libnvshmem_host.so.3 is searched in this order: $NVSHMEM_LIB_DIR; <repo>/.tools/nvshmem (where
 * scripts/install-wheel.sh, called by tools/setup.sh, puts the nvidia-nvshmem-cu12 wheel), looked
 * for in every ancestor of this package and of the working directory; Python's site-packages (a
 * `pip install nvidia-nvshmem-cu12`); then the system library path (dlopen by bare name).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { NativeLibraryError, type NativeAddonSpec, packageRootOf, requireNativeAddon } from "@tensorlane/core"
import type { SymmetricAddon } from "../AddonTypes.js"

const PACKAGE = "@tensorlane/symmetric-mem"
export const NVSHMEM_LIBRARY = "libnvshmem_host.so.3"
const NVSHMEM_WHEEL = "nvidia-nvshmem-cu12==3.8.0"
export const NVSHMEM_FIX = `bash tools/setup.sh (it runs packages/symmetric-mem/scripts/install-wheel.sh), or python3 -m pip install --no-deps --target <repo>/.tools/nvshmem ${NVSHMEM_WHEEL}, or point NVSHMEM_LIB_DIR at the folder holding ${NVSHMEM_LIBRARY}`
/** Where the wheels put the library, relative to their install target (or site-packages). */
const WHEEL_LIB_DIR = join("nvidia", "nvshmem", "lib")

const addonSpec: NativeAddonSpec = {
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  file: "tensorlane_symmetric.node",
  overrideEnv: "TENSORLANE_SYMMETRIC_ADDON",
  fix: `npm run build:native -w ${PACKAGE}, or bash tools/setup.sh`,
}

let addon: SymmetricAddon | undefined

export const loadAddon = (): SymmetricAddon => (addon ??= requireNativeAddon<SymmetricAddon>(addonSpec).addon)

const ancestors = (start: string): Array<string> => {
  const out: Array<string> = []
  for (let dir = start; ; dir = dirname(dir)) {
    out.push(dir)
    if (dirname(dir) === dir) return out
  }
}

const sitePackages = (): Array<string> => {
  try {
    const out = execFileSync("python3", ["-c", "import site; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))"], {
      encoding: "utf8",
      timeout: 10_000,
      stdio: ["ignore", "pipe", "ignore"],
    })
    return out.split("\n").filter((line) => line.length > 0)
  } catch {
    return []
  }
}

/** Candidate paths of libnvshmem_host.so.3, in search order; the last entry is the bare name. */
export const nvshmemCandidates = (): ReadonlyArray<string> => {
  const out: Array<string> = []
  const libDir = process.env.NVSHMEM_LIB_DIR
  if (libDir !== undefined && libDir !== "") out.push(join(libDir, NVSHMEM_LIBRARY))
  const roots = new Set([...ancestors(packageRootOf(import.meta.url, PACKAGE)), ...ancestors(process.cwd())])
  for (const root of roots) out.push(join(root, ".tools", "nvshmem", WHEEL_LIB_DIR, NVSHMEM_LIBRARY))
  for (const site of sitePackages()) out.push(join(site, WHEEL_LIB_DIR, NVSHMEM_LIBRARY))
  out.push(NVSHMEM_LIBRARY)
  return [...new Set(out)]
}

/** The addon with NVSHMEM's host library loaded in this process; NativeLibraryError naming every path tried. */
export const loadNvshmem = (): { readonly addon: SymmetricAddon; readonly library: string } => {
  const native = loadAddon()
  const already = native.nvshmemLoaded()
  if (already !== undefined) return { addon: native, library: already }
  const candidates = nvshmemCandidates()
  const failures: Array<string> = []
  for (const path of candidates) {
    if (path.includes("/") && !fs.existsSync(path)) continue
    try {
      native.nvshmemLoad(path)
      return { addon: native, library: path }
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error))
    }
  }
  throw new NativeLibraryError({
    message: `NVSHMEM's host library (${NVSHMEM_LIBRARY}, from the ${NVSHMEM_WHEEL} wheel) cannot be loaded. Tried: ${candidates.join(", ")}${
      failures.length > 0 ? ` (${failures.join("; ")})` : ""
    }. Fix: ${NVSHMEM_FIX}`,
    library: NVSHMEM_LIBRARY,
    tried: candidates,
    fix: NVSHMEM_FIX,
  })
}
