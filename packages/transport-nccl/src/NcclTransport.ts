/**
 * The `nccl` tensor transport: two-sided GPU transfers between the members of a collective group.
 * Rank 0 makes the ncclUniqueId, the control plane's all-gather shares it, and every member
 * initializes a non-blocking communicator on a native thread of its own. All tensors of an object
 * travel inside one NCCL group call. The runtime's AbortSignal (a timeout, a dead peer) ends a wait
 * with ncclCommAbort: NCCL cannot cancel one operation, so the group is then broken and must be
 * destroyed and created again.
 *
 * Each member's communicator uses one device: $TENSORLANE_NCCL_DEVICE, else cuda:0 (give each actor
 * its own GPU with `spawn(..., { env: { CUDA_VISIBLE_DEVICES: "<n>" } })`, as Ray does; NCCL
 * refuses two ranks on one GPU).
 */
import {
  DeviceError,
  type Device,
  GroupConflictError,
  MissingGroupError,
  ProtocolError,
  ShapeError,
  type Tensor,
  TransferError,
} from "@tensorlane/core"
import { defineTransport } from "@tensorlane/core/plugin"
import { integerSetting, readSetting, timeoutSetting } from "@tensorlane/core/native"
import type { NativeBuffer, NativeOperation, NcclAddon } from "./AddonTypes.js"
import { NCCL_BYTES, ncclReduceOp, reductionType } from "./NcclDTypes.js"
import type { NcclVersion } from "./NcclVersion.js"
import { TRANSPORT, toTensorlaneError } from "./internal/failures.js"
import { NcclError } from "./Errors.js"
import { loadCuda } from "./Loader.js"
import { tensorAddress } from "./internal/memory.js"
import "./CudaAllocator.js"

const UNIQUE_ID_BYTES = 128
const DEFAULT_SETUP_TIMEOUT_MS = 120_000

/** The backstop of every NCCL wait; the runtime's AbortSignal carries a transfer's real timeout. */
const WAIT_TIMEOUT_MS = timeoutSetting("TENSORLANE_NCCL_WAIT_TIMEOUT_MS", 60 * 60 * 1000)
const DESTROY_TIMEOUT_MS = timeoutSetting("TENSORLANE_NCCL_DESTROY_TIMEOUT_MS", 30_000)
/** The CUDA ordinal of this process's communicators. */
const DEVICE = integerSetting("TENSORLANE_NCCL_DEVICE", { min: 0, max: 1 << 20, fallback: 0 })

/** The CUDA device of this process's communicators. */
export const communicatorDevice = (): Device => `cuda:${readSetting(DEVICE)}`

interface Group {
  readonly name: string
  readonly rank: number
  readonly size: number
  readonly device: Device
  readonly addon: NcclAddon
  readonly version: NcclVersion
}

const groups = new Map<string, Group>()

const groupOf = (name: string): Group => {
  const group = groups.get(name)
  if (group === undefined) {
    throw new MissingGroupError({
      message: `process ${process.pid} is not in nccl group "${name}" (destroyed, or never created here); create one with cluster.createCollectiveGroup(actors, { backend: "nccl" })`,
      backend: TRANSPORT,
    })
  }
  return group
}

/**
 * Runs a native operation until it settles. When the signal aborts it, the communicator is aborted
 * and the call rejects with the signal's reason once the native operation has stopped: until then
 * NCCL may still read or write the tensors, which the caller frees or reuses after the rejection.
 */
const run = (group: Group, start: () => NativeOperation, signal: AbortSignal | undefined, what: string, timeoutMs: number): Promise<void> => {
  if (signal?.aborted) return Promise.reject(signal.reason)
  const context = { addon: group.addon, device: group.device, timeoutMs }
  let operation: NativeOperation
  try {
    operation = start()
  } catch (error) {
    return Promise.reject(toTensorlaneError(error, what, context))
  }
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      operation.abort()
      const stopped = () => reject(signal!.reason)
      operation.promise.then(stopped, stopped)
    }
    signal?.addEventListener("abort", onAbort, { once: true })
    operation.promise.then(
      () => {
        signal?.removeEventListener("abort", onAbort)
        if (!signal?.aborted) resolve()
      },
      (error) => {
        signal?.removeEventListener("abort", onAbort)
        if (!signal?.aborted) reject(toTensorlaneError(error, what, context))
      },
    )
  })
}

/** A tensor NCCL can move in place: on the communicator's device and contiguous. */
const deviceBuffer = (group: Group, t: Tensor, what: string, dtype: number): NativeBuffer => {
  if (t.device !== group.device) {
    throw new DeviceError({
      message: `${what}: a tensor on ${t.device} cannot travel over nccl in group "${group.name}", whose communicator uses ${group.device}`,
      device: t.device,
      transport: TRANSPORT,
    })
  }
  if (!t.isContiguous()) {
    throw new ShapeError({ message: `${what}: nccl moves contiguous tensors only; a strided view on ${t.device} needs a copy first (t.clone())` })
  }
  const address = tensorAddress(t, what)
  return { address, count: dtype === NCCL_BYTES ? t.nbytes : t.numel, dtype }
}

/** Empty tensors have no bytes to move (and may have no address): both sides leave them out alike. */
const nonEmpty = (buffers: ReadonlyArray<NativeBuffer>): ReadonlyArray<NativeBuffer> => buffers.filter((b) => b.count > 0)

const destroy = async (name: string): Promise<void> => {
  const group = groups.get(name)
  if (group === undefined) return
  groups.delete(name)
  await group.addon.destroyCommunicator(name, readSetting(DESTROY_TIMEOUT_MS)).catch((error: unknown) => {
    throw toTensorlaneError(error, `destroying nccl group "${name}"`, { addon: group.addon, device: group.device })
  })
}

/** What rank 0 shares: a marker byte, then the ncclUniqueId (ID_MARKER) or why it could not make one (FAILURE_MARKER). */
const ID_MARKER = 0
const FAILURE_MARKER = 1

const idBlob = (id: Uint8Array): Uint8Array => Uint8Array.of(ID_MARKER, ...id)

const failureBlob = (error: Error): Uint8Array => Uint8Array.of(FAILURE_MARKER, ...new TextEncoder().encode(error.message.slice(0, 4096)))

/** The unique id in rank 0's blob; NcclError where rank 0 could not make one, ProtocolError for anything else. */
const uniqueIdOf = (blob: unknown, what: string): Uint8Array => {
  if (blob instanceof Uint8Array && blob[0] === ID_MARKER && blob.byteLength === 1 + UNIQUE_ID_BYTES) return blob.slice(1)
  if (blob instanceof Uint8Array && blob[0] === FAILURE_MARKER) {
    throw new NcclError({ message: `${what}: rank 0 could not make the group's ncclUniqueId: ${new TextDecoder().decode(blob.subarray(1, 4097))}`, operation: "ncclGetUniqueId" })
  }
  throw new ProtocolError({ message: `${what}: rank 0 shared ${blob instanceof Uint8Array ? blob.byteLength : 0} bytes, not a marked ncclUniqueId of ${UNIQUE_ID_BYTES}` })
}

export const nccl = defineTransport({
  name: TRANSPORT,
  capabilities: { oneSided: false, needsGroup: true, abortable: true, devices: ["cuda"], receiveIntoBuffers: true },

  createGroup: async (setup) => {
    if (groups.has(setup.name)) {
      throw new GroupConflictError({ message: `nccl group "${setup.name}" already exists in process ${process.pid}`, backend: TRANSPORT })
    }
    const what = `creating nccl group "${setup.name}" (rank ${setup.rank} of ${setup.worldSize})`
    const { addon, version } = loadCuda()
    const device = communicatorDevice()
    // Rank 0 takes part in the exchange even when it cannot make the id, sharing why instead, so
    // that every member fails at once and says it.
    let made: Uint8Array | Error | undefined
    if (setup.rank === 0) {
      try {
        made = addon.uniqueId()
      } catch (error) {
        made = toTensorlaneError(error, `${what}: ncclGetUniqueId`, { addon, device })
      }
    }
    const shared = await setup.allGather(made === undefined ? new Uint8Array(0) : made instanceof Error ? failureBlob(made) : idBlob(made))
    if (made instanceof Error) throw made
    const id = uniqueIdOf(shared[0], what)
    if (groups.has(setup.name)) throw new TransferError({ message: `${what}: the group was created meanwhile`, transport: TRANSPORT })
    const group: Group = { name: setup.name, rank: setup.rank, size: setup.worldSize, device, addon, version }
    groups.set(setup.name, group)
    const timeoutMs = Number.isFinite(setup.timeoutMs) && setup.timeoutMs > 0 ? setup.timeoutMs : DEFAULT_SETUP_TIMEOUT_MS
    try {
      await run(
        group,
        () => addon.createCommunicator(setup.name, setup.rank, setup.worldSize, Number(device.slice(5)), id, timeoutMs),
        undefined,
        what,
        timeoutMs,
      )
    } catch (error) {
      await destroy(setup.name).catch(() => undefined)
      throw error
    }
  },

  destroyGroup: (name) => destroy(name),

  // async: a refusal must reject, as the runtime expects of every transfer, never throw.
  send: async ({ object, group: name, toRank, signal }) => {
    const what = `ncclSend of ${object.objectId} to rank ${toRank} in group "${name}"`
    const group = groupOf(name)
    const buffers = nonEmpty(object.tensors.map((t) => deviceBuffer(group, t, what, NCCL_BYTES)))
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(group, () => group.addon.transfer(name, toRank, true, buffers, timeoutMs), signal, what, timeoutMs)
  },

  receive: async ({ objectId, group: name, fromRank, tensors, into, signal }) => {
    const what = `ncclRecv of ${objectId} from rank ${fromRank} in group "${name}"`
    const group = groupOf(name)
    if (into.length !== tensors.length) {
      throw new ShapeError({ message: `${what}: ${into.length} destination tensors for an object of ${tensors.length}` })
    }
    const buffers = into.map((t, i) => {
      if (t.nbytes !== tensors[i].nbytes) {
        throw new ShapeError({ message: `${what}: destination tensor ${i} holds ${t.nbytes} bytes, ${tensors[i].nbytes} expected` })
      }
      return deviceBuffer(group, t, what, NCCL_BYTES)
    })
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(group, () => group.addon.transfer(name, fromRank, false, nonEmpty(buffers), timeoutMs), signal, what, timeoutMs)
  },

  allreduce: async ({ group: name, tensors, op, signal }) => {
    const what = `ncclAllReduce (${op}) in group "${name}"`
    const group = groupOf(name)
    const buffers = tensors.map((t) => deviceBuffer(group, t, what, reductionType(t.dtype, group.version, what)))
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(group, () => group.addon.allReduce(name, nonEmpty(buffers), ncclReduceOp[op], timeoutMs), signal, what, timeoutMs)
  },

  broadcast: async ({ group: name, tensors, root, signal }) => {
    const what = `ncclBroadcast from rank ${root} in group "${name}"`
    const group = groupOf(name)
    if (!Number.isInteger(root) || root < 0 || root >= group.size) {
      throw new TransferError({ message: `${what}: the root must be a rank of the group (0 to ${group.size - 1})`, transport: TRANSPORT })
    }
    const buffers = tensors.map((t) => deviceBuffer(group, t, what, NCCL_BYTES))
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(group, () => group.addon.broadcast(name, nonEmpty(buffers), root, timeoutMs), signal, what, timeoutMs)
  },

  // Transfers register nothing per object (pools register memory, and report it through ncclStatus).
  inspect: () => ({ registrations: [] }),

  close: async () => {
    await Promise.allSettled([...groups.keys()].map((name) => destroy(name)))
  },
})

export default nccl
