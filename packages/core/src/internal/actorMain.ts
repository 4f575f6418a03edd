/**
 * Entry point of an actor process. The driver talks to it over fd 3 (a socket pair); the actor's
 * transfer agent, a worker thread, serves its objects to peers over a Unix socket.
 */
import * as net from "node:net"
import { join } from "node:path"
import { type ActorDefinition, isActorDefinition, methodOf } from "../Actor.js"
import { recycleHostMemory } from "../CpuMemory.js"
import { CancelledError, InvalidArgumentError, MissingGroupError, ProtocolError, UnsupportedOperationError } from "../Errors.js"
import { type ActorContext, actorContext } from "../InActor.js"
import { type ClusterIdentity, ObjectRef, type RefTracker } from "../ObjectRef.js"
import type { Tensor } from "../Tensor.js"
import { TensorStore } from "../TensorStore.js"
import type { ReduceOp } from "../Transport.js"
import type { AgentEvent } from "./agent.js"
import { AgentClient } from "./agentClient.js"
import { toWireTensor } from "./wireTensor.js"
import { Connection } from "./connection.js"
import type { Frame } from "./frame.js"
import { type FromActor, type ObjectInfo, type ToActor, type TransferStat, decodeToActor } from "./messages.js"
import { ProcessRuntime, type Resolved, tensorsFromBytes } from "./processRuntime.js"
import { quarantine } from "./quarantine.js"
import { validateMeta } from "./tensorMeta.js"
import { loadTransports, objectStoreName } from "./transportRegistry.js"
import { checkTimeout, describe } from "./arguments.js"
import { settledWithin } from "./waits.js"
import { decodeValue } from "./valueCodec.js"
import { fromWireError, toWireError } from "./wireError.js"

type Call = Extract<ToActor, { _tag: "Call" }>
type Init = Extract<ToActor, { _tag: "Init" }>

/**
 * How long a call waits for the frees that arrived before it (a release normally takes well under
 * 1 ms): a loop that releases a result and asks for the next then recycles the freed memory, where
 * allocating beside it costs page faults.
 */
const SETTLE_FREES_MS = 20
/**
 * A free usually comes just before the next call (a loop releases a result and asks again): its memory
 * is recycled after that call; only when none comes is the process idle enough to collect.
 */
const IDLE_AFTER_FREE_MS = 50

const control = new Connection(new net.Socket({ fd: 3, readable: true, writable: true }), {
  onFrame: (frame) => onFrame(frame),
  // The driver is gone (or broke the protocol): an actor never outlives its driver.
  onClose: () => process.exit(0),
})

const send = (message: FromActor): void => control.send(message)

/**
 * Sends a call's result. Its value fits (checked when it was produced); transfer stats too many to
 * travel beside it are left out, so that the driver still hears of the call (its metrics miss them).
 */
const answer = (result: Extract<FromActor, { _tag: "Result" }>): void => {
  try {
    send(result)
  } catch {
    send({ ...result, transfers: [] })
  }
}

let actor: Actor | undefined

const onFrame = (frame: Frame): void => {
  let message: ToActor
  try {
    message = decodeToActor(frame.header)
  } catch (error) {
    control.close(error as Error)
    return
  }
  if (message._tag === "Init") {
    Actor.start(message).then(
      (started) => {
        actor = started
        send({ _tag: "Ready", agentAddress: started.runtime.agent.address, pid: process.pid })
      },
      (error) => send({ _tag: "InitFailed", error: toWireError(error) }),
    )
    return
  }
  if (actor === undefined) {
    control.close(new ProtocolError({ message: `${message._tag} before Init` }))
    return
  }
  actor.handle(message, frame.body)
}

/** Handles of this process count as borrows with the owner: the first acquires, the last drops. */
class Borrows implements RefTracker {
  constructor(
    readonly cluster: ClusterIdentity,
    private readonly idle: () => boolean,
  ) {}
  private readonly counts = new Map<string, number>()
  /** Objects this actor put: the owner counted the borrow when it registered them. */
  private readonly adopted = new Set<string>()
  adopt = (objectId: string): void => {
    this.adopted.add(objectId)
  }
  acquire = (objectId: string): void => {
    const n = this.counts.get(objectId) ?? 0
    this.counts.set(objectId, n + 1)
    if (n === 0 && !this.adopted.delete(objectId)) send({ _tag: "AddRefs", objectIds: [objectId] })
  }
  /**
   * Drops wait until no call is running: a method may release a ref it put and still return it, and
   * the owner must see the result that names the object before the drop.
   */
  private readonly drops: Array<string> = []
  release = (objectId: string): void => {
    const n = (this.counts.get(objectId) ?? 0) - 1
    if (n > 0) {
      this.counts.set(objectId, n)
      return
    }
    this.counts.delete(objectId)
    this.drops.push(objectId)
    if (this.drops.length === 1) setImmediate(() => this.idle() && this.flush())
  }
  flush = (): void => {
    if (this.drops.length > 0) send({ _tag: "DropRefs", objectIds: this.drops.splice(0) })
  }
}

/**
 * A running call's cancellation. Its AbortSignal is made only when the method asks for it
 * (`cancellationSignal()`): most never do, and making one costs microseconds on every call.
 */
class Cancellation {
  private controller: AbortController | undefined
  private reason: Error | undefined

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.reason !== undefined) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  cancel(reason: Error): void {
    this.reason ??= reason
    this.controller?.abort(reason)
  }

  throwIfCancelled(): void {
    if (this.reason !== undefined) throw this.reason
  }
}

class Actor {
  private readonly queue: Array<{ call: Call; body: Buffer | undefined }> = []
  /** The running calls, by call id, each with what cancels it. */
  private readonly running = new Map<number, { call: Call; cancellation: Cancellation }>()
  private nextReq = 1
  private readonly resolving = new Map<number, { resolve: (info: ObjectInfo) => void; reject: (e: Error) => void }>()
  private readonly acks = new Map<number, { resolve: () => void; reject: (e: Error) => void }>()
  private readonly gathers = new Map<number, { resolve: (blobs: ReadonlyArray<Uint8Array>) => void; reject: (e: Error) => void }>()
  private groups: AgentEvent["groups"] = []

  private constructor(
    private readonly init: Init,
    private readonly definition: ActorDefinition,
    readonly runtime: ProcessRuntime,
    private readonly borrows: Borrows,
    private readonly state: unknown,
  ) {}

  static async start(init: Init): Promise<Actor> {
    const module = (await import(init.moduleUrl)) as Record<string, unknown>
    const definition = module[init.exportName]
    if (!isActorDefinition(definition)) {
      throw new InvalidArgumentError({ message: `${init.moduleUrl} has no actor definition exported as "${init.exportName}"`, argument: "definition" })
    }
    let self: Actor | undefined
    const cluster = { id: init.clusterId, closed: false }
    const borrows = new Borrows(cluster, () => self?.idle ?? true)
    const agent = await AgentClient.start(
      {
        processId: init.actorId,
        address: join(init.clusterDir, `${init.actorId}.sock`),
        transports: init.transports,
        parentPid: process.ppid,
      },
      (event) => {
        if (self !== undefined) self.groups = event.groups
      },
    )
    const transports = await loadTransports(init.transports, {
      fetchFrom: () => Promise.reject(new UnsupportedOperationError({ message: "fetches run in the transfer agent" })),
    })
    const store = new TensorStore()
    const runtime = new ProcessRuntime(
      init.actorId,
      cluster,
      agent,
      store,
      transports,
      (id) => new ObjectRef(id, borrows),
      // Waiting for a receive is idle time for this thread: a collection that is due (a size running
      // out) runs now, beside the transfer, rather than after the call, on the next call's path.
      () => recycleHostMemory(store.takeDroppedHostBytes()),
    )
    const state = await definition.spec.init({ index: init.index, actorId: init.actorId })
    self = new Actor(init, definition, runtime, borrows, state)
    return self
  }

  handle(message: Exclude<ToActor, Init>, body: Buffer | undefined): void {
    switch (message._tag) {
      case "Call":
        this.queue.push({ call: message, body })
        this.pump()
        return
      case "Free":
        this.runtime.free(message.objectIds).then(
          () => this.recycleWhenIdle(IDLE_AFTER_FREE_MS),
          (error) => console.error("tensorlane: free failed:", error),
        )
        return
      case "Cancel":
        this.cancel(message.callId)
        return
      case "Resolved": {
        const waiter = this.resolving.get(message.reqId)
        this.resolving.delete(message.reqId)
        if (message.error !== undefined) waiter?.reject(fromWireError(message.error, { actor: "driver", method: "get" }))
        else if (message.info !== undefined) waiter?.resolve(message.info)
        return
      }
      case "PutAck": {
        const waiter = this.acks.get(message.reqId)
        this.acks.delete(message.reqId)
        if (message.error !== undefined) waiter?.reject(fromWireError(message.error, { actor: "driver", method: "put" }))
        else waiter?.resolve()
        return
      }
      case "AllGathered": {
        const waiter = this.gathers.get(message.reqId)
        this.gathers.delete(message.reqId)
        if (message.error !== undefined) waiter?.reject(fromWireError(message.error, { actor: "driver", method: "allGather" }))
        else waiter?.resolve(message.blobs ?? [])
        return
      }
      case "Inspect":
        this.runtime.inspect().then(
          (inspection) => send({ _tag: "Inspection", reqId: message.reqId, inspection }),
          (error) => console.error("tensorlane: inspect failed:", error),
        )
        return
      case "PeerDied":
        this.runtime.peerDied(message.peer)
        return
      case "Prefetch":
        this.runtime
          .resolve(message.info, { timeoutMs: this.init.transferTimeoutMs, collective: message.collective })
          .then(
            (r) => {
              this.runtime.store.pinReceived(message.info.objectId, r.value, r.tensors)
              send({ _tag: "Prefetched", reqId: message.reqId, transfers: r.stat ? [r.stat] : [] })
            },
            (error) => send({ _tag: "Prefetched", reqId: message.reqId, error: toWireError(error), transfers: [] }),
          )
        return
      case "Shutdown":
        this.runtime.close().finally(() => process.exit(0))
        return
    }
  }

  get idle(): boolean {
    return this.running.size === 0
  }

  /** A queued call is answered as cancelled and never runs; a running one's signal aborts. */
  private cancel(callId: number): void {
    const queued = this.queue.findIndex((q) => q.call.callId === callId)
    const running = this.running.get(callId)
    const call = queued >= 0 ? this.queue.splice(queued, 1)[0]!.call : running?.call
    // Not here any more: its result is on its way.
    if (call === undefined) return
    const cancelled = new CancelledError({ message: `${this.init.actorId}.${call.method} was cancelled`, objectId: call.returnId })
    if (running !== undefined) running.cancellation.cancel(cancelled)
    else send({ _tag: "Result", callId, error: toWireError(cancelled), transfers: [] })
  }

  private recycleTimer: NodeJS.Timeout | undefined
  private recycleAt = 0

  /**
   * Memory the store dropped (a free, a call's received copies) is recycled while nothing runs, off
   * the next call's path.
   */
  private recycleWhenIdle(afterMs = 0): void {
    if (this.running.size > 0) return
    const at = performance.now() + afterMs
    // A sooner request (a call just ended) replaces a later one (a free's wait for the next call).
    if (this.recycleTimer !== undefined && this.recycleAt <= at) return
    clearTimeout(this.recycleTimer)
    this.recycleAt = at
    this.recycleTimer = setTimeout(() => {
      this.recycleTimer = undefined
      if (this.running.size === 0 && this.queue.length === 0) recycleHostMemory(this.runtime.store.takeDroppedHostBytes())
    }, afterMs)
  }

  private pump(): void {
    const limit = Math.max(1, this.init.maxConcurrency)
    while (this.running.size < limit && this.queue.length > 0) {
      const { call, body } = this.queue.shift()!
      const cancellation = new Cancellation()
      this.running.set(call.callId, { call, cancellation })
      this.run(call, body, cancellation)
        .catch((error: unknown) => {
          console.error(`tensorlane: ${this.init.actorId} could not answer call ${call.callId}:`, error)
        })
        .then(() => {
          this.running.delete(call.callId)
          if (this.running.size === 0) this.borrows.flush()
          this.pump()
          this.recycleWhenIdle()
        })
    }
  }

  /** Runs a call and sends its result; a call cancelled before its method starts does not run it. */
  private async run(call: Call, body: Buffer | undefined, cancellation: Cancellation): Promise<void> {
    const transfers: Array<TransferStat> = []
    const received: Array<string> = []
    try {
      const entry = methodOf(this.definition, call.method)
      if (entry === undefined) throw new InvalidArgumentError({ message: `actor ${this.definition.name} has no method "${call.method}"`, argument: "method" })
      const frees = this.runtime.freesUnderWay
      const args = await this.arguments(call, body, transfers, received)
      await settledWithin(frees, SETTLE_FREES_MS)
      cancellation.throwIfCancelled()
      const value = await actorContext.run(this.context(transfers, cancellation), () => entry.fn(this.state, ...args))
      const transport = call.transport ?? entry.options.tensorTransport ?? objectStoreName
      const info = await this.runtime.produce(call.returnId, value, transport, "result")
      answer({ _tag: "Result", callId: call.callId, info, transfers })
    } catch (error) {
      answer({ _tag: "Result", callId: call.callId, error: toWireError(error), transfers })
    } finally {
      for (const objectId of received) this.runtime.store.dropReceived(objectId)
    }
  }

  private async arguments(call: Call, body: Buffer | undefined, transfers: Array<TransferStat>, received: Array<string>): Promise<Array<unknown>> {
    const byValue = tensorsFromBytes(call.argTensors.map(validateMeta), body ?? new Uint8Array(0), `call ${call.callId}`)
    const outcomes = await this.receiveAll(call.refs)
    const resolved = new Map<string, unknown>()
    call.refs.forEach((info, i) => {
      const outcome = outcomes[i]!
      if (outcome.status === "rejected") return
      const r = outcome.value
      resolved.set(info.objectId, r.value)
      if (r.stat !== undefined) transfers.push(r.stat)
      if (r.received) {
        this.runtime.store.holdReceived(info.objectId, r.value, r.tensors)
        received.push(info.objectId)
      }
    })
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected")
    if (failed !== undefined) throw failed.reason
    const args = decodeValue(call.args, {
      tensor: (i) => byValue[i] ?? missing(`argument tensor ${i}`),
      ref: (id) => (resolved.has(id) ? resolved.get(id) : missing(`argument object ${id}`)),
    })
    if (!Array.isArray(args)) throw new ProtocolError({ message: "call arguments are not a list" })
    return args
  }

  /**
   * Takes in every object a call refers to, even once one has failed: its producer is sending the
   * others, and would wait for them until its time limit (a transport that matches by order would
   * also pair its later transfers wrongly). Transfers that match by object, or need no producer,
   * run at once; the others one after another, in the order the owner asked for their sends.
   */
  private async receiveAll(refs: ReadonlyArray<ObjectInfo>): Promise<Array<PromiseSettledResult<Resolved>>> {
    const outcomes = new Array<PromiseSettledResult<Resolved>>(refs.length)
    const take = (i: number): Promise<void> =>
      this.runtime.resolve(refs[i]!, { timeoutMs: this.init.transferTimeoutMs }).then(
        (value) => void (outcomes[i] = { status: "fulfilled", value }),
        (reason: unknown) => void (outcomes[i] = { status: "rejected", reason }),
      )
    const inOrder: Array<number> = []
    const atOnce: Array<Promise<void>> = []
    refs.forEach((info, i) => (this.orderFree(info.transport) ? atOnce.push(take(i)) : inOrder.push(i)))
    for (const i of inOrder) await take(i)
    await Promise.all(atOnce)
    return outcomes
  }

  /**
   * Whether a transfer over `transport` pairs with its send whatever the order (one-sided, or matched
   * by object). An unknown transport counts as ordered: its object then fails in turn, naming it.
   */
  private orderFree(transport: string): boolean {
    try {
      const capabilities = this.runtime.transport(transport).capabilities
      return capabilities.oneSided || capabilities.matchesByObject === true
    } catch {
      return false
    }
  }

  /** What a method reaches through `get`, `put` and the rest; its gets' transfers go with its result to the driver. */
  private context(transfers: Array<TransferStat>, cancellation: Cancellation): ActorContext {
    return {
      actorId: this.init.actorId,
      get signal() {
        return cancellation.signal
      },
      put: async (value, options) => {
        const transport = options?.tensorTransport ?? objectStoreName
        const capabilities = this.runtime.transport(transport).capabilities
        if (!capabilities.oneSided) {
          throw new UnsupportedOperationError({
            message: `put with the two-sided transport "${transport}" is not possible: its receivers are not known in advance; use a one-sided transport or return the value from a method`,
          })
        }
        const objectId = this.runtime.newObjectId()
        const info = await this.runtime.produce(objectId, value, transport, "put")
        const reqId = this.nextReq++
        const acked = new Promise<void>((resolve, reject) => this.acks.set(reqId, { resolve, reject }))
        send({ _tag: "Put", reqId, info })
        this.borrows.adopt(objectId)
        const ref = this.runtime.makeRef(objectId) as ObjectRef<any>
        await acked
        return ref
      },
      get: (refs, options) =>
        this.runtime.get(refs, options ?? {}, this.init.transferTimeoutMs, async (ref, remainingMs) => {
          const reqId = this.nextReq++
          const info = await new Promise<ObjectInfo>((resolve, reject) => {
            this.resolving.set(reqId, { resolve, reject })
            send({ _tag: "Resolve", reqId, objectId: ref.id, ...(Number.isFinite(remainingMs) ? { timeoutMs: remainingMs } : {}) })
          })
          return { info }
        }, (stat) => transfers.push(stat)),
      waitTensorFreed: async (tensor, options) => this.runtime.store.waitTensorFreed(tensor, checkTimeout(options?.timeoutMs, "timeoutMs") ?? Infinity),
      group: (name) => {
        const member = this.groups.find((g) => g.name === name)
        if (member === undefined) {
          throw new MissingGroupError({ message: `${this.init.actorId} is in no group named "${name}"`, backend: "" })
        }
        const collective = async (kind: "allreduce" | "broadcast", tensors: ReadonlyArray<Tensor>, reduce: ReduceOp, root: number, timeoutMs?: number) => {
          const transfer = this.runtime.agent.transfer({
            op: "collective",
            kind,
            group: name,
            tensors: tensors.map(toWireTensor),
            reduce,
            root,
            timeoutMs: checkTimeout(timeoutMs, "timeoutMs") ?? this.init.transferTimeoutMs,
          })
          try {
            await transfer.done
          } catch (error) {
            quarantine(tensors, transfer.released())
            throw error
          }
        }
        return {
          ...member,
          allreduce: (tensors, options) => collective("allreduce", tensors, options?.op ?? "sum", 0, options?.timeoutMs),
          broadcast: (tensors, options) => collective("broadcast", tensors, "sum", options.root, options.timeoutMs),
          allGather: (blob, options) => {
            if (!(blob instanceof Uint8Array)) {
              return Promise.reject(new InvalidArgumentError({ message: `allGather takes a Uint8Array, not ${describe(blob)}`, argument: "blob" }))
            }
            const reqId = this.nextReq++
            return new Promise<ReadonlyArray<Uint8Array>>((resolve, reject) => {
              const timeoutMs = checkTimeout(options?.timeoutMs, "timeoutMs") ?? this.init.transferTimeoutMs
              // First: a blob over the limit rejects with MessageTooLargeError and leaves no waiter behind.
              send({ _tag: "AllGather", reqId, group: name, blob, timeoutMs })
              this.gathers.set(reqId, { resolve, reject })
            })
          },
        }
      },
    }
  }
}

const missing = (what: string): never => {
  throw new ProtocolError({ message: `a call names ${what}, which it does not carry` })
}
