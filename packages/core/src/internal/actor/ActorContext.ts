/**
 * What an actor method reaches through `put`, `get`, `waitTensorFreed`, `group` and
 * `cancellationSignal` (InActor.ts): the running call's context. Its requests to the driver (a put's
 * registration, the info of an object to get, a round of a group's all-gather) wait for the driver's
 * reply on the control connection.
 */
import { InvalidArgumentError, MissingGroupError, ProtocolError, UnsupportedOperationError } from "../../Errors.js"
import type { ActorContext } from "../../InActor.js"
import type { ObjectRef } from "../../ObjectRef.js"
import type { Tensor } from "../../Tensor.js"
import type { ReduceOp } from "../../Transport.js"
import type { Membership } from "../agent/Memberships.js"
import { checkTimeout, describe } from "../arguments.js"
import type { FromActor, ToActor, TransferStat } from "../messages.js"
import type { ProcessRuntime } from "../processRuntime.js"
import { quarantine } from "../quarantine.js"
import type { Requests } from "../requests.js"
import { objectStoreName } from "../transportRegistry.js"
import { toWireTensor } from "../wireTensor.js"
import type { Borrows } from "./Borrows.js"
import type { Cancellation } from "./CallQueue.js"

/** The driver's replies to an actor's requests. */
export type DriverReply = Extract<ToActor, { _tag: "Resolved" | "PutAck" | "AllGathered" }>

export interface ContextSettings {
  readonly actorId: string
  readonly transferTimeoutMs: number
  readonly runtime: ProcessRuntime
  readonly borrows: Borrows
  readonly send: (message: FromActor) => void
  /** This actor's requests to the driver, answered by DriverReply messages. */
  readonly requests: Requests<DriverReply>
  /** The groups this actor is a member of now. */
  readonly memberships: () => ReadonlyArray<Membership>
}

/** Sends a request to the driver and waits for its reply, which must be tagged `tag`. */
const ask = async <T extends DriverReply["_tag"]>(settings: ContextSettings, request: (reqId: number) => FromActor, tag: T): Promise<Extract<DriverReply, { _tag: T }>> => {
  const reply = await settings.requests.request((reqId) => settings.send(request(reqId)))
  if (reply._tag !== tag) throw new ProtocolError({ message: `the driver answered with ${reply._tag}, not ${tag}` })
  return reply as Extract<DriverReply, { _tag: T }>
}

/** The context of one running call: its gets' transfers go to `transfers`, reported with its result. */
export const callContext = (settings: ContextSettings, transfers: Array<TransferStat>, cancellation: Cancellation): ActorContext => {
  const { actorId, runtime, transferTimeoutMs } = settings
  return {
    actorId,
    get signal() {
      return cancellation.signal
    },
    put: async (value, options) => {
      const transport = options?.tensorTransport ?? objectStoreName
      if (!runtime.transport(transport).capabilities.oneSided) {
        throw new UnsupportedOperationError({
          message: `put with the two-sided transport "${transport}" is not possible: its receivers are not known in advance; use a one-sided transport or return the value from a method`,
        })
      }
      const objectId = runtime.newObjectId()
      const info = await runtime.produce(objectId, value, transport, "put")
      const acked = ask(settings, (reqId) => ({ _tag: "Put", reqId, info }), "PutAck")
      settings.borrows.adopt(objectId)
      const ref = runtime.makeRef(objectId) as ObjectRef<any>
      await acked
      return ref
    },
    get: (refs, options) =>
      runtime.get(
        refs,
        options ?? {},
        transferTimeoutMs,
        async (ref, remainingMs) => {
          const reply = await ask(settings, (reqId) => ({ _tag: "Resolve", reqId, objectId: ref.id, ...(Number.isFinite(remainingMs) ? { timeoutMs: remainingMs } : {}) }), "Resolved")
          if (reply.info === undefined) throw new ProtocolError({ message: `the driver resolved ${ref} to nothing` })
          return { info: reply.info }
        },
        (stat) => transfers.push(stat),
      ),
    waitTensorFreed: async (tensor, options) => runtime.store.waitTensorFreed(tensor, checkTimeout(options?.timeoutMs, "timeoutMs") ?? Infinity),
    group: (name) => {
      const member = settings.memberships().find((g) => g.name === name)
      if (member === undefined) {
        throw new MissingGroupError({ message: `${actorId} is in no group named "${name}"`, backend: "" })
      }
      const collective = async (kind: "allreduce" | "broadcast", tensors: ReadonlyArray<Tensor>, reduce: ReduceOp, root: number, timeoutMs?: number) => {
        const transfer = runtime.agent.transfer({
          op: "collective",
          kind,
          group: name,
          tensors: tensors.map(toWireTensor),
          reduce,
          root,
          timeoutMs: checkTimeout(timeoutMs, "timeoutMs") ?? transferTimeoutMs,
        })
        try {
          await transfer.done
        } catch (error) {
          quarantine(tensors, transfer.released())
          throw error
        }
      }
      return {
        name: member.name,
        backend: member.backend,
        rank: member.rank,
        worldSize: member.worldSize,
        allreduce: (tensors, options) => collective("allreduce", tensors, options?.op ?? "sum", 0, options?.timeoutMs),
        broadcast: (tensors, options) => collective("broadcast", tensors, "sum", options.root, options.timeoutMs),
        allGather: async (blob, options) => {
          if (!(blob instanceof Uint8Array)) {
            throw new InvalidArgumentError({ message: `allGather takes a Uint8Array, not ${describe(blob)}`, argument: "blob" })
          }
          const timeoutMs = checkTimeout(options?.timeoutMs, "timeoutMs") ?? transferTimeoutMs
          const reply = await ask(settings, (reqId) => ({ _tag: "AllGather", reqId, group: name, groupId: member.id, blob, timeoutMs }), "AllGathered")
          return reply.blobs ?? []
        },
      }
    },
  }
}
