/**
 * Loads the native addon on first use (importing the package never fails on a machine where it is
 * not built), and NVSHMEM's host library on demand. The addon is one shared object per process, so
 * the main thread and the transfer agent's worker thread see the same mapped segments.
 *
 * libnvshmem_host.so.3 is searched in this order: $NVSHMEM_LIB_DIR; the user cache, where
 * `npx tensorlane install nvshmem` unpacks the nvidia-nvshmem-cu12 wheel; <repo>/.tools/libraries
 * (where tools/setup.sh unpacks it), looked for in every ancestor of this package and of the
 * working directory; Python's site-packages (a `pip install nvidia-nvshmem-cu12`); then the system
 * library path (dlopen by bare name).
 */
import { type RuntimeWheel, libraryCandidates, loadNativeLibrary, nativePackage } from "@tensorlane/core/native"
import type { SymmetricAddon } from "./AddonTypes.js"

export const PACKAGE = "@tensorlane/symmetric-mem"
const NVSHMEM_LIBRARY = "libnvshmem_host.so.3"

/** NVSHMEM's wheel. Unpacked: the host library with its bootstrap and transport plugins; not the device libraries (static, bitcode). */
const NVSHMEM_WHEEL: RuntimeWheel = {
  name: "nvidia-nvshmem-cu12",
  version: "3.8.0",
  url: "https://files.pythonhosted.org/packages/42/1d/3ffe6972761c9e77d6bf3cc15d0cea27ac23341de5436e091c6c965c3886/nvidia_nvshmem_cu12-3.8.0-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
  bytes: 280_800_183,
  sha256: "b2e5760d6158aefe7bb74348d5128bb1b46a7dd1fd4b7b1e6fe55b4b07888f70",
  libraries: [/^nvidia\/nvshmem\/lib\/(libnvshmem_host\.so\.3|nvshmem_(bootstrap|transport)_\w+\.so\.\d+)$/],
}

/** What `npx tensorlane install nvshmem` fetches. */
export const runtimeWheels: ReadonlyArray<RuntimeWheel> = [NVSHMEM_WHEEL]

// The addon is tensorlane_symmetric.node, and `npx tensorlane install nvshmem` fetches its library.
const native = nativePackage({ packageName: PACKAGE, moduleUrl: import.meta.url, addon: "symmetric", install: "nvshmem" })

/** The addon, loaded on first use (NativeLibraryError listing every candidate when it cannot load). */
export const addon = native.addon<SymmetricAddon>()

export const nvshmemSpec = native.library({
  library: NVSHMEM_LIBRARY,
  what: "NVSHMEM's host library",
  wheel: NVSHMEM_WHEEL,
  folder: "nvidia/nvshmem/lib",
  override: { env: "NVSHMEM_LIB_DIR", names: "folder" },
})

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
