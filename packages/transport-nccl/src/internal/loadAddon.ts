/**
 * Finds and loads the native addon, libnccl.so.2 and the CUDA runtime on first use, so that
 * importing the transport never fails on a machine without them; a failure says what is missing,
 * every place that was tried, and what to run.
 *
 * Each library is searched in this order (the way vLLM finds libnccl.so.2):
 * 1. an environment override naming the file: TENSORLANE_NCCL_LIBRARY, TENSORLANE_CUDART_LIBRARY.
 *    When set it is the only candidate: a library the user named is never silently replaced.
 * 2. the wheels: <repo>/.tools/nccl (where scripts/install-wheel.sh, called by tools/setup.sh,
 *    installs nvidia-nccl-cu12 and nvidia-cuda-runtime-cu12), looked for in every ancestor of this
 *    package and of the working directory, then Python's site-packages (a `pip install` of the
 *    cu12 or cu13 wheels);
 * 3. the system library path (dlopen by bare name).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { NativeLibraryError, type NativeAddonSpec, packageRootOf, requireNativeAddon } from "@tensorlane/core"
import type { NcclAddon } from "../AddonTypes.js"
import { type NcclVersion, parseNcclVersion } from "../NcclVersion.js"

const PACKAGE = "@tensorlane/transport-nccl"
const INSTALL = "bash tools/setup.sh (it runs packages/transport-nccl/scripts/install-wheel.sh)"

export const NCCL_LIBRARY_ENV = "TENSORLANE_NCCL_LIBRARY"
export const CUDART_LIBRARY_ENV = "TENSORLANE_CUDART_LIBRARY"

interface LibrarySpec {
  readonly library: string
  readonly env: string
  /** Paths of the library inside a wheel install target (site-packages or .tools/nccl). */
  readonly wheelPaths: ReadonlyArray<string>
  readonly systemNames: ReadonlyArray<string>
  readonly fix: string
}

const NCCL: LibrarySpec = {
  library: "libnccl.so.2",
  env: NCCL_LIBRARY_ENV,
  wheelPaths: ["nvidia/nccl/lib/libnccl.so.2"],
  systemNames: ["libnccl.so.2"],
  fix: `${INSTALL}, or python3 -m pip install --no-deps --target <repo>/.tools/nccl nvidia-nccl-cu12, or set ${NCCL_LIBRARY_ENV} to the path of a libnccl.so.2`,
}

const CUDART: LibrarySpec = {
  library: "libcudart.so.12",
  env: CUDART_LIBRARY_ENV,
  wheelPaths: ["nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia/cu13/lib/libcudart.so.13"],
  systemNames: ["libcudart.so.12", "libcudart.so.13", "libcudart.so"],
  fix: `${INSTALL}, or python3 -m pip install --no-deps --target <repo>/.tools/nccl nvidia-cuda-runtime-cu12, or set ${CUDART_LIBRARY_ENV} to the path of a libcudart.so`,
}

const addonSpec: NativeAddonSpec = {
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  file: "tensorlane_nccl.node",
  overrideEnv: "TENSORLANE_NCCL_ADDON",
  fix: `npm run build:native -w ${PACKAGE}, or bash tools/setup.sh`,
}

const ancestors = (start: string): Array<string> => {
  const out: Array<string> = []
  for (let dir = start; ; dir = dirname(dir)) {
    out.push(dir)
    if (dirname(dir) === dir) return out
  }
}

let sites: ReadonlyArray<string> | undefined

/** Site-packages folders of the python3 on PATH (a virtualenv's included); none without Python. */
const sitePackages = (): ReadonlyArray<string> => {
  if (sites !== undefined) return sites
  try {
    const out = execFileSync(
      "python3",
      ["-c", "import site; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))"],
      { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] },
    )
    sites = out.split("\n").filter((line) => line.length > 0)
  } catch {
    sites = []
  }
  return sites
}

const candidatesOf = (spec: LibrarySpec): ReadonlyArray<string> => {
  const override = process.env[spec.env]
  if (override !== undefined && override !== "") return [override]
  const roots = new Set([...ancestors(packageRootOf(import.meta.url, PACKAGE)), ...ancestors(process.cwd())])
  const out: Array<string> = []
  for (const root of roots) for (const path of spec.wheelPaths) out.push(join(root, ".tools", "nccl", path))
  for (const site of sitePackages()) for (const path of spec.wheelPaths) out.push(join(site, path))
  out.push(...spec.systemNames)
  return [...new Set(out)]
}

/** Candidate paths of libnccl.so.2 and of the CUDA runtime, in search order. */
export const libraryCandidates = (): { readonly nccl: ReadonlyArray<string>; readonly cudart: ReadonlyArray<string> } => ({
  nccl: candidatesOf(NCCL),
  cudart: candidatesOf(CUDART),
})

const loadLibrary = <R>(spec: LibrarySpec, load: (path: string) => R): R => {
  const candidates = candidatesOf(spec)
  const failures: Array<string> = []
  for (const path of candidates) {
    // Paths that do not exist are skipped without a dlopen; bare names go to the system's search.
    if (path.includes("/") && !fs.existsSync(path)) continue
    try {
      return load(path)
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error))
    }
  }
  throw new NativeLibraryError({
    message: `${spec.library} cannot be loaded. Tried: ${candidates.join(", ")}${failures.length > 0 ? ` (${failures.join("; ")})` : ""}. Fix: ${spec.fix}`,
    library: spec.library,
    tried: candidates,
    fix: spec.fix,
  })
}

export interface LoadedNccl {
  readonly addon: NcclAddon
  readonly library: string
  readonly version: NcclVersion
}

let addon: NcclAddon | undefined
let nccl: LoadedNccl | undefined
let cudart: string | undefined

const requireAddon = (): NcclAddon => (addon ??= requireNativeAddon<NcclAddon>(addonSpec).addon)

/**
 * The addon with libnccl.so.2 loaded in this process (by this thread or another: the library is
 * process-wide); NativeLibraryError when the addon or the library cannot be loaded.
 */
export const loadNccl = (): LoadedNccl => {
  if (nccl !== undefined) return nccl
  const a = requireAddon()
  const already = a.loaded()
  const loaded =
    already.nccl !== undefined && already.ncclVersion !== undefined
      ? { path: already.nccl, version: already.ncclVersion }
      : loadLibrary(NCCL, (path) => a.loadNccl(path))
  return (nccl = { addon: a, library: loaded.path, version: parseNcclVersion(loaded.version) })
}

/** loadNccl, and the CUDA runtime loaded as well (device memory, streams). */
export const loadCuda = (): LoadedNccl & { readonly cudart: string } => {
  const loaded = loadNccl()
  cudart ??= loaded.addon.loaded().cudart ?? loadLibrary(CUDART, (path) => loaded.addon.loadCudart(path))
  return { ...loaded, cudart }
}
