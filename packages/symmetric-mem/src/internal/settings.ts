/** Sizes and host identity the shm backend and transport read from the environment (core's settings reader). */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { integerSetting, readSetting, textSetting } from "@tensorlane/core/native"

const GiB = 2 ** 30

/** The most a segment holds (native/Segment.cc refuses larger ones). */
const SEGMENT_MAX_BYTES = 2 ** 46

const HEAP_BYTES = integerSetting("TENSORLANE_SHM_HEAP_BYTES", { min: 1, max: SEGMENT_MAX_BYTES, fallback: GiB, unit: "bytes" })
const STAGING_BYTES = integerSetting("TENSORLANE_SHM_STAGING_BYTES", { min: 1, max: SEGMENT_MAX_BYTES, fallback: 4 * GiB, unit: "bytes" })
const CUDA_DRIVER_LIBRARY = textSetting("TENSORLANE_CUDA_DRIVER_LIBRARY", "the path or name of the CUDA driver library")

/**
 * Bytes of each rank's symmetric heap in an shm group (rank 0's setting wins). The segment is
 * sparse: memory is taken block by block as allocations reserve it, so a generous default costs
 * address space only.
 */
export const heapBytesPerRank = (): number => readSetting(HEAP_BYTES)

/** Bytes of the process's staging heap, where the shm transport copies tensors that are not on a heap already. */
export const stagingBytes = (): number => readSetting(STAGING_BYTES)

/** The CUDA driver library the nvshmem backend selects its device with (the system's, unless overridden). */
export const cudaDriverLibrary = (): string => readSetting(CUDA_DRIVER_LIBRARY) ?? "libcuda.so.1"

let boot: string | undefined

/** Identifies this host's running kernel: pids and fds only mean something on the host that gave them. */
export const bootId = (): string => {
  if (boot !== undefined) return boot
  try {
    boot = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    boot = `no-boot-id-${randomBytes(8).toString("hex")}`
  }
  return boot
}

/** POSIX shared-memory names of shm groups: unique per group incarnation, recognizable in /dev/shm. */
export const SEGMENT_PREFIX = "tensorlane-sym-"

export const groupKey = (group: string): string => `group:${group}`

export const segmentNameFor = (group: string): string =>
  `/${SEGMENT_PREFIX}${group.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 64)}-${process.pid}-${randomBytes(8).toString("hex")}`
