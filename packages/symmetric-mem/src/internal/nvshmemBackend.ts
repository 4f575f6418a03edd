/**
 * The `nvshmem` backend: NVSHMEM's host library, loaded at run time, bootstrapped over the group's
 * control-plane gather (rank 0's unique id) with nvshmemx_hostlib_init_attr, which returns an error
 * code instead of ending the process. NVSHMEM exits the process when an allocation finds it not
 * initialized, so every allocation first checks nvshmemx_init_status(), natively, and the ranks
 * agree that every one of them initialized before any allocates; a failed init is remembered and
 * refused on every later call. NVSHMEM works on the device current at its init, so each rank makes
 * the device it was asked for current right before (cudaSetDevice's effect, through the CUDA
 * driver), and later allocations must ask for that device.
 */
import { type Device, DeviceError, OutOfMemoryError, type GroupMember, deviceIndex, parseDevice } from "@tensorlane/core"
import { gatherJson, messageOf } from "@tensorlane/core/plugin"
import type { SymmetricAddon } from "../AddonTypes.js"
import type { Gather, SymmetricBackend, SymmetricBlock } from "../Backend.js"
import { SymmetricBackendError } from "../Errors.js"
import { collectiveAllocator, deviceStorage } from "./collectiveMemory.js"
import { isNativeFailure } from "@tensorlane/core/native"
import { toTensorlaneError } from "./failures.js"
import { loadNvshmem } from "../Loader.js"
import { cudaDriverLibrary } from "./settings.js"

const NAME = "nvshmem"
const INITIALIZED = 2
/** nvshmemx_init_status() values below INITIALIZED, and the init error codes, as NVSHMEM names them. */
const STATUS_NAMES: Readonly<Record<number, string>> = { 0: "NVSHMEM_STATUS_NOT_INITIALIZED", 1: "NVSHMEM_STATUS_IS_BOOTSTRAPPED" }
const ERROR_NAMES: Readonly<Record<number, string>> = { 1: "NVSHMEMX_ERROR_INVALID_VALUE", 2: "NVSHMEMX_ERROR_OUT_OF_MEMORY", 3: "NVSHMEMX_ERROR_NOT_SUPPORTED", 4: "NVSHMEMX_ERROR_SYMMETRY", 5: "NVSHMEMX_ERROR_GPU_NOT_SELECTED", 6: "NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED", 7: "NVSHMEMX_ERROR_INTERNAL", 8: "NVSHMEMX_ERROR_SENTINEL" }

interface InitReport {
  readonly status: number
  readonly uid?: string
  readonly rc?: number
  readonly error?: string
  /** The device asked for cannot be made current although the driver works (no such ordinal, say). */
  readonly deviceError?: string
  /** Why no device was made current (the driver did not load, say): NVSHMEM's init says the rest. */
  readonly unselected?: string
}

const isInitReport = (value: unknown): boolean => typeof value === "object" && value !== null && typeof (value as InitReport).status === "number"

/** The outcome of this process's bootstrap, agreed by every rank: once settled, no more gathers. */
let settled: { readonly ok: true; readonly world: string; readonly device: Device } | { readonly ok: false; readonly why: string } | undefined
let liveBlocks = 0


const refuse = (why: string): never => {
  throw new SymmetricBackendError({ message: `NVSHMEM is not initialized, so nothing is allocated (NVSHMEM would exit the process): ${why}`, backend: NAME, reason: "not-initialized" })
}

const describeStatus = (s: number): string => `${STATUS_NAMES[s] ?? "status"} (${s})`

/**
 * Initializes NVSHMEM on `device` on every rank (unique-id bootstrap through the group) unless it
 * already is; refuses on every rank if any rank fails. A device the driver does not have fails every
 * rank with DeviceError before the init, and leaves NVSHMEM free to be initialized later.
 */
const ensureInitialized = async (member: GroupMember, gather: Gather, device: Device): Promise<void> => {
  if (settled?.ok === false) refuse(settled.why)
  // Another group or device was refused before the ranks agreed (nvshmemBackend.refuse).
  if (settled?.ok === true) return
  const { addon } = loadNvshmem()
  const status = addon.nvshmemStatus()
  const ordinal = deviceIndex(device)
  const probe = status === 0 ? addon.cudaProbe(cudaDriverLibrary(), ordinal) : undefined
  const deviceError = probe !== undefined && !probe.usable && probe.deviceCount >= 0 ? `${device}: ${probe.reason}` : undefined
  let uid: string | undefined
  let error: string | undefined
  if (member.rank === 0 && status === 0 && deviceError === undefined) {
    try {
      uid = Buffer.from(addon.nvshmemUniqueId()).toString("base64")
    } catch (e) {
      error = `nvshmemx_get_uniqueid failed: ${messageOf(e)}`
    }
  }
  const group = { name: member.name, allGather: gather }
  const first = await gatherJson<InitReport>(group, { status, uid, error, deviceError }, { check: isInitReport })
  const deviceErrors = first.flatMap((r, rank) => (r.deviceError === undefined ? [] : [`rank ${rank}: ${r.deviceError}`]))
  if (deviceErrors.length > 0) {
    throw new DeviceError({ message: `NVSHMEM was not initialized, so nothing is allocated: ${deviceErrors.join("; ")}`, device })
  }
  let report: InitReport = { status }
  if (first.every((r) => r.status === 0) && first[0].uid !== undefined) {
    // Made current right before the init, with nothing else running on this thread in between.
    const unselected = probe?.usable === true ? addon.cudaMakeCurrent(ordinal) : probe?.reason
    const rc = addon.nvshmemInitialize(member.rank, member.worldSize, Buffer.from(first[0].uid, "base64"))
    const current = addon.cudaCurrentDevice()
    const elsewhere = current >= 0 && current !== ordinal ? `NVSHMEM initialized on cuda:${current}, not on the ${device} asked for` : undefined
    report = { status: addon.nvshmemStatus(), rc, unselected, error: elsewhere }
  } else if (first.some((r) => r.status < INITIALIZED)) {
    report = { status, error: first.find((r) => r.error !== undefined)?.error ?? "the ranks' NVSHMEM states differ (some initialized, some not)" }
  }
  const second = await gatherJson<InitReport>(group, report, { check: isInitReport })
  const failures = second
    .map((r, rank) => [rank, r] as const)
    .filter(([, r]) => r.status < INITIALIZED || r.error !== undefined)
    .map(([rank, r]) => {
      const failure = r.error ?? `nvshmemx_hostlib_init_attr returned ${r.rc} (${ERROR_NAMES[r.rc ?? -1] ?? "unknown"}), status ${describeStatus(r.status)}`
      return `rank ${rank}: ${failure}${r.unselected !== undefined ? ` (no device made current: ${r.unselected})` : ""}`
    })
  if (failures.length > 0) {
    settled = { ok: false, why: `${failures.join("; ")}. NVSHMEM needs an NVIDIA GPU with its driver on every rank` }
    refuse(settled.why)
  }
  settled = { ok: true, world: member.name, device }
}

/** The device an nvshmem allocation asks for (default cuda:0); throws on a malformed one. */
const requestedDevice = (device: Device | undefined): Device => parseDevice(device ?? "cuda:0")

/** A peer's copy of a block, as this GPU addresses it: NVSHMEM gives none (NULL) for a peer it cannot load from or store to. */
const peerAddress = (addon: SymmetricAddon, pointer: bigint, rank: number, group: string): bigint => {
  const address = addon.nvshmemPeer(pointer, rank)
  if (address === 0n) {
    throw new SymmetricBackendError({
      message: `rank ${rank} of group "${group}" is not reachable by loads and stores from this GPU (NVSHMEM's nvshmem_ptr gives no address: another node, or no peer-to-peer access between the GPUs): peerTensor needs peers on this node with P2P`,
      backend: NAME,
      reason: "unsupported",
    })
  }
  return address
}

export const nvshmemBackend: SymmetricBackend = {
  name: NAME,
  heapId: () => NAME,
  digest: () => String(liveBlocks),
  refuse: (member, options) => {
    const device = requestedDevice(options.device)
    if (device === "cpu") return new DeviceError({ message: "the nvshmem backend allocates GPU memory; pass a cuda device", device })
    if (settled?.ok !== true) return undefined
    if (settled.world !== member.name) {
      return new SymmetricBackendError({ message: `NVSHMEM was initialized for group "${settled.world}"; one process has one NVSHMEM world`, backend: NAME, reason: "wrong-group" })
    }
    if (settled.device !== device) {
      return new DeviceError({ message: `NVSHMEM was initialized on ${settled.device} in process ${process.pid}, so it cannot allocate on ${device}: one process has one NVSHMEM device`, device })
    }
    return undefined
  },
  allocate: async (member, byteLength, gather, options) => {
    const device = requestedDevice(options.device)
    await ensureInitialized(member, gather, device)
    const { addon } = loadNvshmem()
    let pointer: bigint
    try {
      pointer = addon.nvshmemMalloc(byteLength)
    } catch (error) {
      if (isNativeFailure(error) && error.code === "system") {
        throw new OutOfMemoryError({ message: `${error.message} (the heap's size is NVSHMEM_SYMMETRIC_SIZE)`, requested: byteLength, capacity: 0 })
      }
      throw toTensorlaneError(error, `nvshmem allocation in group "${member.name}"`)
    }
    liveBlocks++
    const allocator = collectiveAllocator(NAME, device)
    const block: SymmetricBlock = {
      device,
      storage: (rank, n, isFreed) => deviceStorage(allocator, n, { address: rank === member.rank ? pointer : peerAddress(addon, pointer, rank, member.name) }, isFreed),
      free: () => {
        liveBlocks--
        addon.nvshmemFree(pointer)
      },
    }
    return block
  },
}
