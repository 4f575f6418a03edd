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
import { join } from "node:path"
import { type NativeLibrarySpec, libraryCandidates, loadNativeLibrary, nativeAddon } from "@tensorlane/core/native"
import type { SymmetricAddon } from "./AddonTypes.js"

export const PACKAGE = "@tensorlane/symmetric-mem"
const NVSHMEM_LIBRARY = "libnvshmem_host.so.3"
const NVSHMEM_WHEEL = "nvidia-nvshmem-cu12==3.8.0"
const NVSHMEM_FIX = `bash tools/setup.sh (it runs packages/symmetric-mem/scripts/install-wheel.sh), or python3 -m pip install --no-deps --target <repo>/.tools/nvshmem ${NVSHMEM_WHEEL}, or point NVSHMEM_LIB_DIR at the folder holding ${NVSHMEM_LIBRARY}`

/** The addon, loaded on first use (NativeLibraryError listing every candidate when it cannot load). */
export const addon = nativeAddon<SymmetricAddon>({ packageName: PACKAGE, moduleUrl: import.meta.url, name: "symmetric" })

export const nvshmemSpec: NativeLibrarySpec = {
  library: NVSHMEM_LIBRARY,
  description: `NVSHMEM's host library (${NVSHMEM_LIBRARY}, from the ${NVSHMEM_WHEEL} wheel)`,
  packageName: PACKAGE,
  moduleUrl: import.meta.url,
  override: { env: "NVSHMEM_LIB_DIR", names: "folder" },
  toolDir: "nvshmem",
  wheelPaths: [join("nvidia", "nvshmem", "lib", NVSHMEM_LIBRARY)],
  systemNames: [NVSHMEM_LIBRARY],
  fix: NVSHMEM_FIX,
}

export const loadAddon = (): SymmetricAddon => addon.load().addon

/** Candidate paths of libnvshmem_host.so.3, in search order; the last entry is the bare name. */
export const nvshmemCandidates = (): ReadonlyArray<string> => libraryCandidates(nvshmemSpec)

/** The addon with NVSHMEM's host library loaded in this process; NativeLibraryError naming every path tried. */
export const loadNvshmem = (): { readonly addon: SymmetricAddon; readonly library: string } => {
  const native = loadAddon()
  const already = native.nvshmemLoaded()
  if (already !== undefined) return { addon: native, library: already }
  return { addon: native, library: loadNativeLibrary(nvshmemSpec, (path) => native.nvshmemLoad(path)).path }
}
