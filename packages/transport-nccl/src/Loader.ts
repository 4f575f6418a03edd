/**
 * Finds and loads the native addon, libnccl.so.2 and the CUDA runtime on first use, so that
 * importing the transport never fails on a machine without them; a failure says what is missing,
 * every place that was tried, and what to run.
 *
 * Each library is searched in this order (the way vLLM finds libnccl.so.2):
 * 1. an environment override naming the file: TENSORLANE_NCCL_LIBRARY, TENSORLANE_CUDART_LIBRARY.
 *    When set it is the only candidate: a library the user named is never silently replaced.
 * 2. the wheels nvidia-nccl-cu12 and nvidia-cuda-runtime-cu12: in the user cache (where
 *    `npx tensorlane install nccl` unpacks them), in <repo>/.tools/libraries (tools/setup.sh), looked
 *    for in every ancestor of this package and of the working directory, then in Python's
 *    site-packages (a `pip install` of the cu12 or cu13 wheels);
 * 3. the system library path (dlopen by bare name).
 */
import { type RuntimeWheel, libraryCandidates as candidatesOf, loadNativeLibrary, nativePackage } from "@tensorlane/core/native"
import type { NcclAddon } from "./AddonTypes.js"
import { type NcclVersion, parseNcclVersion } from "./NcclVersion.js"

export const PACKAGE = "@tensorlane/transport-nccl"

export const NCCL_LIBRARY_ENV = "TENSORLANE_NCCL_LIBRARY"
export const CUDART_LIBRARY_ENV = "TENSORLANE_CUDART_LIBRARY"

const NCCL_WHEEL: RuntimeWheel = {
  name: "nvidia-nccl-cu12",
  version: "2.28.9",
  url: "https://files.pythonhosted.org/packages/4a/4e/44dbb46b3d1b0ec61afda8e84837870f2f9ace33c564317d59b70bc19d3e/nvidia_nccl_cu12-2.28.9-py3-none-manylinux_2_18_x86_64.whl",
  bytes: 296_782_137,
  sha256: "485776daa8447da5da39681af455aa3b2c2586ddcf4af8772495e7c532c7e5ab",
  libraries: [/^nvidia\/nccl\/lib\/libnccl\.so\.2$/],
}

const CUDART_WHEEL: RuntimeWheel = {
  name: "nvidia-cuda-runtime-cu12",
  version: "12.9.79",
  url: "https://files.pythonhosted.org/packages/bc/46/a92db19b8309581092a3add7e6fceb4c301a3fd233969856a8cbf042cd3c/nvidia_cuda_runtime_cu12-12.9.79-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
  bytes: 3_493_179,
  sha256: "25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3",
  libraries: [/^nvidia\/cuda_runtime\/lib\/libcudart\.so\.12$/],
}

/** What `npx tensorlane install nccl` fetches. */
export const runtimeWheels: ReadonlyArray<RuntimeWheel> = [NCCL_WHEEL, CUDART_WHEEL]

const native = nativePackage({ packageName: PACKAGE, moduleUrl: import.meta.url })

export const NCCL = native.library({ library: "libnccl.so.2", wheel: NCCL_WHEEL, folder: "nvidia/nccl/lib", override: { env: NCCL_LIBRARY_ENV, names: "file" } })

const CUDART = native.library({
  library: "libcudart.so.12",
  wheel: CUDART_WHEEL,
  folder: "nvidia/cuda_runtime/lib",
  override: { env: CUDART_LIBRARY_ENV, names: "file" },
  siblings: ["nvidia/cu13/lib/libcudart.so.13"],
  systemNames: ["libcudart.so.13", "libcudart.so"],
})

const addon = native.addon<NcclAddon>()

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
