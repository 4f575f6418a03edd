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
import { type NativeLibrarySpec, libraryCandidates as candidatesOf, loadNativeLibrary, nativeAddon } from "@tensorlane/core/native"
import type { NcclAddon } from "./AddonTypes.js"
import { type NcclVersion, parseNcclVersion } from "./NcclVersion.js"

export const PACKAGE = "@tensorlane/transport-nccl"
const INSTALL = "bash tools/setup.sh (it runs packages/transport-nccl/scripts/install-wheel.sh)"

export const NCCL_LIBRARY_ENV = "TENSORLANE_NCCL_LIBRARY"
export const CUDART_LIBRARY_ENV = "TENSORLANE_CUDART_LIBRARY"

const wheelLibrary = (library: string, env: string, wheelPaths: ReadonlyArray<string>, systemNames: ReadonlyArray<string>, fix: string): NativeLibrarySpec => ({
  library,
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  override: { env, names: "file" },
  toolDir: "nccl",
  wheelPaths,
  systemNames,
  fix,
})

export const NCCL = wheelLibrary(
  "libnccl.so.2",
  NCCL_LIBRARY_ENV,
  ["nvidia/nccl/lib/libnccl.so.2"],
  ["libnccl.so.2"],
  `${INSTALL}, or python3 -m pip install --no-deps --target <repo>/.tools/nccl nvidia-nccl-cu12, or set ${NCCL_LIBRARY_ENV} to the path of a libnccl.so.2`,
)

const CUDART = wheelLibrary(
  "libcudart.so.12",
  CUDART_LIBRARY_ENV,
  ["nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia/cu13/lib/libcudart.so.13"],
  ["libcudart.so.12", "libcudart.so.13", "libcudart.so"],
  `${INSTALL}, or python3 -m pip install --no-deps --target <repo>/.tools/nccl nvidia-cuda-runtime-cu12, or set ${CUDART_LIBRARY_ENV} to the path of a libcudart.so`,
)

const addon = nativeAddon<NcclAddon>({ packageName: PACKAGE, moduleUrl: import.meta.url, name: "nccl" })

/** Candidate paths of libnccl.so.2 and of the CUDA runtime, in search order. */
export const libraryCandidates = (): { readonly nccl: ReadonlyArray<string>; readonly cudart: ReadonlyArray<string> } => ({
  nccl: candidatesOf(NCCL),
  cudart: candidatesOf(CUDART),
})

export interface LoadedNccl {
  readonly addon: NcclAddon
  readonly library: string
  readonly version: NcclVersion
}

let nccl: LoadedNccl | undefined
let cudart: string | undefined

/**
 * The addon with libnccl.so.2 loaded in this process (by this thread or another: the library is
 * process-wide); NativeLibraryError when the addon or the library cannot be loaded.
 */
export const loadNccl = (): LoadedNccl => {
  if (nccl !== undefined) return nccl
  const a = addon.load().addon
  const already = a.loaded()
  const loaded =
    already.nccl !== undefined && already.ncclVersion !== undefined
      ? { path: already.nccl, version: already.ncclVersion }
      : loadNativeLibrary(NCCL, (path) => a.loadNccl(path)).loaded
  return (nccl = { addon: a, library: loaded.path, version: parseNcclVersion(loaded.version) })
}

/** loadNccl, and the CUDA runtime loaded as well (device memory, streams). */
export const loadCuda = (): LoadedNccl & { readonly cudart: string } => {
  const loaded = loadNccl()
  cudart ??= loaded.addon.loaded().cudart ?? loadNativeLibrary(CUDART, (path) => loaded.addon.loadCudart(path)).loaded
  return { ...loaded, cudart }
}
