/** Sizes and host identity the shm backend and transport read from the environment. */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { ShapeError } from "@tensorlane/core"

const GiB = 2 ** 30

const bytesFromEnv = (variable: string, fallback: number): number => {
  const raw = process.env[variable]
  if (raw === undefined || raw === "") return fallback
  const n = Number(raw)
  if (!Number.isSafeInteger(n) || n <= 0) throw new ShapeError({ message: `${variable} must be a positive integer number of bytes, got "${raw}"` })
  return n
}

/**
 * Bytes of each rank's symmetric heap in an shm group (rank 0's setting wins). The segment is
 * sparse: memory is taken block by block as allocations reserve it, so a generous default costs
 * address space only.
 */
export const heapBytesPerRank = (): number => bytesFromEnv("TENSORLANE_SHM_HEAP_BYTES", GiB)

/** Bytes of the process's staging heap, where the shm transport copies tensors that are not on a heap already. */
export const stagingBytes = (): number => bytesFromEnv("TENSORLANE_SHM_STAGING_BYTES", 4 * GiB)

/** The CUDA driver library the nvshmem backend selects its device with (the system's, unless overridden). */
export const cudaDriverLibrary = (): string => process.env.TENSORLANE_CUDA_DRIVER_LIBRARY || "libcuda.so.1"

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
