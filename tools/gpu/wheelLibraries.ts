/**
 * The device's NVIDIA libraries, as wheel_libraries.py finds them in python3's installed wheels, and
 * the loaders' overrides that point the checks at them.
 */
import { execFileSync } from "node:child_process"
import { dirname } from "node:path"
import { fileURLToPath } from "node:url"

/** Carries the libraries found to the check processes (the `libraries` check compares the loaders' own choice with them). */
export const LIBRARIES_ENV = "TENSORLANE_GPU_CHECK_WHEELS"

export interface WheelLibrary {
  readonly path: string
  readonly dist: string
  readonly version: string
}

/** Every wheel's copy of each library, the newest CUDA's first. */
export interface WheelLibraries {
  readonly nccl?: ReadonlyArray<WheelLibrary>
  readonly cudart?: ReadonlyArray<WheelLibrary>
  readonly nvshmem?: ReadonlyArray<WheelLibrary>
  readonly cudaDriver?: string | null
  readonly python?: string
  readonly executable?: string
  readonly packages?: Readonly<Record<string, string | null>>
  /** Why python3 could not be asked. */
  readonly error?: string
}

const SCRIPT = fileURLToPath(new URL("./wheel_libraries.py", import.meta.url))

export const findWheelLibraries = (): WheelLibraries => {
  try {
    return JSON.parse(execFileSync("python3", [SCRIPT], { encoding: "utf8", timeout: 30_000, stdio: ["ignore", "pipe", "pipe"] })) as WheelLibraries
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) }
  }
}

/**
 * transport-nccl's and symmetric-mem's overrides (see their loadAddon.ts) for the first copy of each
 * library found. The names are written out rather than imported so that the runner starts, and
 * reports, even when the packages do not load; the `libraries` check compares them with the packages'.
 */
export const loaderOverrides = (found: WheelLibraries): Record<string, string> => {
  const [nccl, cudart, nvshmem] = [found.nccl?.[0], found.cudart?.[0], found.nvshmem?.[0]]
  return {
    ...(nccl === undefined ? {} : { TENSORLANE_NCCL_LIBRARY: nccl.path }),
    ...(cudart === undefined ? {} : { TENSORLANE_CUDART_LIBRARY: cudart.path }),
    ...(nvshmem === undefined ? {} : { NVSHMEM_LIB_DIR: dirname(nvshmem.path) }),
  }
}
