/**
 * The `gloo` tensor transport: two-sided CPU transfers between the members of a collective group
 * over Gloo's TCP pairs, straight from the producer's tensor memory into the consumer's. Every
 * blocking gloo call runs on a native thread of the addon, so transfers progress while the
 * process's JS threads are busy; the runtime's AbortSignal ends a wait (timeouts, dead peers).
 */
import {
  DTypeError,
  DeviceError,
  GroupConflictError,
  MissingGroupError,
  ShapeError,
  type Tensor,
  TransferError,
  UnsupportedOperationError,
} from "@tensorlane/core"
import { defineTransport } from "@tensorlane/core/plugin"
import { readSetting, timeoutSetting } from "@tensorlane/core/native"
import type { NativeGroup, NativeOperation } from "./AddonTypes.js"
import { TRANSPORT, toTensorlaneError } from "./internal/failures.js"
import { addon as glooAddon } from "./Loader.js"

/** The dtypes gloo reduces (its math on float16 included); broadcast moves every dtype. */
export const reducibleDTypes: ReadonlyArray<string> = [
  "float32",
  "float64",
  "float16",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
]

const DEFAULT_CONNECT_TIMEOUT_MS = 120_000

/**
 * The backstop of every gloo wait. The runtime's AbortSignal carries a transfer's real timeout and
 * aborts the wait without harm; a gloo timeout instead poisons the group, so it must come last.
 */
const WAIT_TIMEOUT_MS = timeoutSetting("TENSORLANE_GLOO_WAIT_TIMEOUT_MS", 60 * 60 * 1000)

/**
 * Connecting a group waits up to 5x the context timeout in all for the peers of its pairs (gloo's
 * own bound for a pair's listening side, which the addon applies to the whole connect): a fifth of
 * the group's timeout bounds it.
 */
const contextTimeoutMs = (setupTimeoutMs: number): number =>
  Math.max(1000, (Number.isFinite(setupTimeoutMs) && setupTimeoutMs > 0 ? setupTimeoutMs : DEFAULT_CONNECT_TIMEOUT_MS) / 5)

const groups = new Map<string, NativeGroup>()

/**
 * The group `name`: created by this thread (the transfer agent), or published by another thread of
 * the process and attached here (a main thread receiving; the transport declares anyThread).
 */
const groupOf = (name: string): NativeGroup => {
  const group = groups.get(name) ?? attached(name)
  if (group === undefined) {
    throw new MissingGroupError({
      message: `process ${process.pid} is not in gloo group "${name}" (destroyed, or never created here); create one with cluster.createCollectiveGroup(actors, { backend: "gloo" })`,
      backend: TRANSPORT,
    })
  }
  return group
}

const attached = (name: string): NativeGroup | undefined => glooAddon.load().addon.Group.attach(name)

/** How often a failed operation's buffers that stay posted are looked at again (their pair may have closed). */
const SWEEP_INTERVAL_MS = 250

/** Until `operation` is retired, lets the group let go of its buffers once their pair closed. */
const sweepUntilRetired = (native: NativeGroup, operation: NativeOperation): void => {
  const timer = setInterval(() => native.sweep(), SWEEP_INTERVAL_MS)
  timer.unref()
  void operation.retired.then(() => clearInterval(timer))
}

/**
 * Runs a native operation until it settles, or until the signal aborts it: then at once with the
 * signal's reason. `writesUntil` hears when gloo no longer touches the operation's buffers.
 */
const run = (
  native: NativeGroup,
  start: () => NativeOperation,
  signal: AbortSignal,
  what: string,
  timeoutMs: number,
  writesUntil: ((done: Promise<unknown>) => void) | undefined,
): Promise<void> => {
  if (signal.aborted) return Promise.reject(signal.reason)
  let operation: NativeOperation
  try {
    operation = start()
  } catch (error) {
    return Promise.reject(toTensorlaneError(error, what, timeoutMs))
  }
  writesUntil?.(operation.retired)
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      operation.abort()
      sweepUntilRetired(native, operation)
      reject(signal.reason)
    }
    signal.addEventListener("abort", onAbort, { once: true })
    operation.promise.then(
      () => {
        signal.removeEventListener("abort", onAbort)
        resolve()
      },
      (error) => {
        signal.removeEventListener("abort", onAbort)
        sweepUntilRetired(native, operation)
        reject(toTensorlaneError(error, what, timeoutMs))
      },
    )
  })
}

const requireCpu = (t: Tensor, what: string): void => {
  if (t.device !== "cpu") {
    throw new DeviceError({
      message: `${what}: a tensor on ${t.device} cannot travel over gloo, which moves cpu memory: copy it to the cpu first (t.to("cpu")), or use a transport for ${t.device} (nccl)`,
      device: t.device,
      transport: TRANSPORT,
    })
  }
}

/** The bytes of a tensor that a collective updates, or a receive writes, in place. */
const inPlaceBytes = (t: Tensor, what: string): Uint8Array => {
  requireCpu(t, what)
  if (!t.isContiguous()) {
    throw new ShapeError({ message: `${what}: gloo works in place on contiguous tensors only; pass t.contiguous() and use that tensor` })
  }
  return t.storage.bytes.subarray(t.byteOffset, t.byteOffset + t.nbytes)
}

const destroy = (name: string): void => {
  const group = groups.get(name)
  if (group === undefined) return
  groups.delete(name)
  group.destroy()
}

const strandedInGroups = (): Array<string> => {
  const addon = glooAddon.loaded()
  if (addon === undefined) return []
  return addon.Group.published().flatMap((name) => {
    const stranded = addon.Group.attach(name)?.stranded
    if (stranded === undefined || stranded.operations === 0) return []
    const what = stranded.operations === 1 ? "1 aborted operation stays" : `${stranded.operations} aborted operations stay`
    const memory = stranded.bytes > 0 ? `, keeping ${stranded.bytes} bytes of tensor memory` : ""
    return [`gloo group "${name}": ${what} posted until it is destroyed or the peer goes${memory}`]
  })
}

/**
 * A collective's checks on this rank, an aborted signal first: one that fails still takes its part,
 * as refused, so that the other ranks fail at once and every rank's next collective lines up
 * (AddonTypes' `refuse`).
 */
const refusing = <A>(native: NativeGroup, timeoutMs: number, signal: AbortSignal, check: () => A): A => {
  try {
    if (signal.aborted) throw signal.reason
    return check()
  } catch (error) {
    native.refuse(timeoutMs)
    throw error
  }
}

export const gloo = defineTransport({
  name: TRANSPORT,
  // Groups are published natively, so a main thread receives through the agent's group itself.
  // Slots derive from the object id: a receive takes its own object's send, whatever their order.
  // A failed operation's buffers that stay posted are free again once their pair closes (`retired`).
  capabilities: { oneSided: false, needsGroup: true, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, anyThread: true, matchesByObject: true, tracksBuffers: true, inlinesSmallValues: true },

  createGroup: async (setup) => {
    if (groups.has(setup.name)) {
      throw new GroupConflictError({
        message: `gloo group "${setup.name}" already exists in process ${process.pid}: destroy it (group.destroy()) before creating it again`,
        backend: TRANSPORT,
      })
    }
    const what = `creating gloo group "${setup.name}" (rank ${setup.rank} of ${setup.worldSize})`
    const timeoutMs = contextTimeoutMs(setup.timeoutMs)
    const { addon } = glooAddon.load()
    let native: NativeGroup
    try {
      // The device's thread stays free to run on any CPU: kept to one, it waits for that CPU
      // whenever other work holds it (see the README).
      native = new addon.Group(setup.rank, setup.worldSize, timeoutMs)
    } catch (error) {
      throw toTensorlaneError(error, what, timeoutMs)
    }
    groups.set(setup.name, native)
    try {
      const blobs = await setup.allGather(native.address())
      if (groups.get(setup.name) !== native) throw new TransferError({ message: `${what}: the group was destroyed meanwhile`, transport: TRANSPORT })
      await native.connect(blobs)
      native.publish(setup.name)
    } catch (error) {
      if (groups.get(setup.name) === native) groups.delete(setup.name)
      native.destroy()
      throw toTensorlaneError(error, what, timeoutMs)
    }
  },

  destroyGroup: async (name) => destroy(name),

  // async: a refusal must reject, as the runtime expects of every transfer, never throw.
  send: async ({ object, group, toRank, signal }) => {
    const what = `gloo send of ${object.objectId} to rank ${toRank} in group "${group}"`
    const native = groupOf(group)
    const buffers = object.tensors.map((t) => {
      requireCpu(t, what)
      // A view without copying when contiguous; a strided view is packed into a fresh buffer.
      return t.contiguousBytes()
    })
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(native, () => native.send(toRank, object.objectId, buffers, timeoutMs), signal, what, timeoutMs, undefined)
  },

  receive: async ({ objectId, group, fromRank, tensors, into, signal, writesUntil }) => {
    const what = `gloo receive of ${objectId} from rank ${fromRank} in group "${group}"`
    const native = groupOf(group)
    if (into.length !== tensors.length) {
      throw new ShapeError({ message: `${what}: ${into.length} destination tensors for an object of ${tensors.length}` })
    }
    const buffers = into.map((t, i) => {
      const bytes = inPlaceBytes(t, what)
      if (t.nbytes !== tensors[i].nbytes) {
        throw new ShapeError({ message: `${what}: destination tensor ${i} must hold ${tensors[i].nbytes} bytes (it holds ${t.nbytes})` })
      }
      return bytes
    })
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    await run(native, () => native.receive(fromRank, objectId, buffers, timeoutMs), signal, what, timeoutMs, writesUntil)
  },

  allreduce: async ({ group, tensors, op, signal, writesUntil }) => {
    const what = `gloo allreduce (${op}) in group "${group}"`
    const native = groupOf(group)
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    const buffers = refusing(native, timeoutMs, signal, () => {
      for (const t of tensors) {
        if (!reducibleDTypes.includes(t.dtype)) {
          throw new DTypeError({ message: `${what}: gloo cannot reduce ${t.dtype}; it reduces ${reducibleDTypes.join(", ")}` })
        }
      }
      return tensors.map((t) => inPlaceBytes(t, what))
    })
    await run(native, () => native.allreduce(buffers, tensors.map((t) => t.dtype), op, timeoutMs), signal, what, timeoutMs, writesUntil)
  },

  broadcast: async ({ group, tensors, root, signal, writesUntil }) => {
    const what = `gloo broadcast from rank ${root} in group "${group}"`
    const native = groupOf(group)
    const timeoutMs = readSetting(WAIT_TIMEOUT_MS)
    const buffers = refusing(native, timeoutMs, signal, () => {
      if (!Number.isInteger(root) || root < 0 || root >= native.size) {
        throw new UnsupportedOperationError({ message: `${what}: the root must be a rank of the group (0 to ${native.size - 1})` })
      }
      return tensors.map((t) => inPlaceBytes(t, what))
    })
    await run(native, () => native.broadcast(buffers, root, timeoutMs), signal, what, timeoutMs, writesUntil)
  },

  // Registers nothing; lists what aborted operations keep in this process's groups (process-wide,
  // whichever thread asks) until those are destroyed.
  inspect: () => ({ registrations: strandedInGroups() }),

  close: () => {
    for (const name of [...groups.keys()]) destroy(name)
  },
})

export default gloo
