/**
 * An actor's calls: queued in the order the driver sends them, run up to `maxConcurrency` at once,
 * each with its arguments taken in first, and answered with its result. A queued call that is
 * cancelled never runs; a running one's signal aborts.
 */
import { type ActorDefinition, methodOf } from "../../Actor.js"
import { CancelledError, InvalidArgumentError, ProtocolError } from "../../Errors.js"
import { type ActorContext, runInActorContext } from "../../InActor.js"
import type { FromActor, ObjectInfo, ToActor, TransferStat } from "../messages.js"
import type { ProcessRuntime, Resolved } from "../processRuntime.js"
import { tensorsFromBytes } from "../tensorMeta.js"
import { readMetas } from "../wireMetas.js"
import { objectStoreName } from "../transportRegistry.js"
import { decodeValue } from "../valueCodec.js"
import { settledWithin } from "../waits.js"
import { toWireError } from "../wireError.js"

type Call = Extract<ToActor, { _tag: "Call" }>
type Result = Extract<FromActor, { _tag: "Result" }>

/**
 * How long a call waits for the frees that arrived before it (a release normally ends at once): a
 * loop that releases a result and asks for the next then recycles the freed memory, where allocating
 * beside it costs page faults.
 */
const SETTLE_FREES_MS = 20

/**
 * A running call's cancellation. Its AbortSignal is made only when the method asks for it
 * (`cancellationSignal()`): most never do, and making one on every call is measurable.
 */
export class Cancellation {
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

export interface CallQueueOptions {
  readonly actorId: string
  readonly maxConcurrency: number
  readonly transferTimeoutMs: number
  readonly definition: ActorDefinition
  /** What `init` returned: every method's first argument. */
  readonly state: unknown
  readonly runtime: ProcessRuntime
  /** Sends a call's result to the driver. */
  readonly answer: (result: Result) => void
  /** What a method reaches through `get`, `put` and the rest; `transfers` collects those of its gets. */
  readonly context: (transfers: Array<TransferStat>, cancellation: Cancellation) => ActorContext
  /** No call runs any more. */
  readonly idle: () => void
  /** A call ended (and the next ones started). */
  readonly ended: () => void
}

export class CallQueue {
  private readonly queue: Array<{ call: Call; body: Buffer | undefined }> = []
  /** The running calls, by call id, each with what cancels it. */
  private readonly running = new Map<number, { call: Call; cancellation: Cancellation }>()

  constructor(private readonly options: CallQueueOptions) {}

  /** Whether a call runs or waits to. */
  get busy(): boolean {
    return this.running.size > 0 || this.queue.length > 0
  }

  /** Whether no call runs. */
  get idle(): boolean {
    return this.running.size === 0
  }

  push(call: Call, body: Buffer | undefined): void {
    this.queue.push({ call, body })
    this.pump()
  }

  /** A queued call is answered as cancelled and never runs; a running one's signal aborts. */
  cancel(callId: number): void {
    const queued = this.queue.findIndex((q) => q.call.callId === callId)
    const running = this.running.get(callId)
    const call = queued >= 0 ? this.queue.splice(queued, 1)[0]!.call : running?.call
    // Not here any more: its result is on its way.
    if (call === undefined) return
    const cancelled = new CancelledError({ message: `${this.options.actorId}.${call.method} was cancelled`, objectId: call.returnId })
    if (running !== undefined) running.cancellation.cancel(cancelled)
    else this.options.answer({ _tag: "Result", callId, error: toWireError(cancelled), transfers: [] })
  }

  private pump(): void {
    const limit = Math.max(1, this.options.maxConcurrency)
    while (this.running.size < limit && this.queue.length > 0) {
      const { call, body } = this.queue.shift()!
      const cancellation = new Cancellation()
      this.running.set(call.callId, { call, cancellation })
      this.run(call, body, cancellation)
        .catch((error: unknown) => {
          console.error(`tensorlane: ${this.options.actorId} could not answer call ${call.callId}:`, error)
        })
        .then(() => {
          this.running.delete(call.callId)
          if (this.running.size === 0) this.options.idle()
          this.pump()
          this.options.ended()
        })
    }
  }

  /** Runs a call and sends its result; a call cancelled before its method starts does not run it. */
  private async run(call: Call, body: Buffer | undefined, cancellation: Cancellation): Promise<void> {
    const { runtime, definition } = this.options
    const transfers: Array<TransferStat> = []
    const received: Array<string> = []
    try {
      const entry = methodOf(definition, call.method)
      if (entry === undefined) throw new InvalidArgumentError({ message: `actor ${definition.name} has no method "${call.method}"`, argument: "method" })
      const frees = runtime.freesUnderWay
      const args = await this.arguments(call, body, transfers, received)
      await settledWithin(frees, SETTLE_FREES_MS)
      cancellation.throwIfCancelled()
      const value = await runInActorContext(this.options.context(transfers, cancellation), () => entry.fn(this.options.state, ...args))
      const transport = call.transport ?? entry.options.tensorTransport ?? objectStoreName
      const info = await runtime.produce(call.returnId, value, transport, "result")
      this.options.answer({ _tag: "Result", callId: call.callId, info, transfers })
    } catch (error) {
      this.options.answer({ _tag: "Result", callId: call.callId, error: toWireError(error), transfers })
    } finally {
      for (const objectId of received) runtime.store.dropReceived(objectId)
    }
  }

  private async arguments(call: Call, body: Buffer | undefined, transfers: Array<TransferStat>, received: Array<string>): Promise<Array<unknown>> {
    const byValue = tensorsFromBytes(readMetas(call.argTensors), body ?? new Uint8Array(0), `call ${call.callId}`)
    const outcomes = await this.receiveAll(call.refs)
    const resolved = new Map<string, unknown>()
    call.refs.forEach((info, i) => {
      const outcome = outcomes[i]!
      if (outcome.status === "rejected") return
      const r = outcome.value
      resolved.set(info.objectId, r.value)
      if (r.stat !== undefined) transfers.push(r.stat)
      if (r.received) {
        this.options.runtime.store.holdReceived(info.objectId, r.value, r.tensors)
        received.push(info.objectId)
      }
    })
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected")
    if (failed !== undefined) throw failed.reason
    const args = decodeValue(call.args, {
      tensors: byValue,
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
      this.options.runtime.resolve(refs[i]!, { timeoutMs: this.options.transferTimeoutMs }).then(
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
      const capabilities = this.options.runtime.transport(transport).capabilities
      return capabilities.oneSided || capabilities.matchesByObject === true
    } catch {
      return false
    }
  }
}

const missing = (what: string): never => {
  throw new ProtocolError({ message: `a call names ${what}, which it does not carry` })
}
