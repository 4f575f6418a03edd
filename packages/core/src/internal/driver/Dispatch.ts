/**
 * Method calls, from the driver's side: a call is submitted at once (its ref handed out) and
 * dispatched to its actor in submission order once its arguments are ready, with the route of every
 * argument that moves over a two-sided transport; sends of arguments still being made start early
 * where the transport allows; a call's result, cancellation, and its actor's death settle it.
 */
import { type CallOptions, methodOf } from "../../Actor.js"
import { type ActorDiedError, CancelledError, MessageTooLargeError, MissingGroupError } from "../../Errors.js"
import { ObjectRef, requireOpen, requireUsableRef } from "../../ObjectRef.js"
import { MAX_VALUE_BYTES, tooLarge } from "../frame.js"
import type { FromActor, ObjectInfo, ToActor } from "../messages.js"
import type { Entry, ObjectDirectory } from "../objectDirectory.js"
import type { ProcessRuntime } from "../processRuntime.js"
import { metaCount, writeMetas } from "../wireMetas.js"
import { objectStoreName } from "../transportRegistry.js"
import { encodeValue } from "../valueCodec.js"
import { fromWireError } from "../wireError.js"
import { type ActorProcesses, type ActorRecord, dead } from "./ActorProcesses.js"
import type { AgentLinks } from "./AgentLinks.js"
import type { DriverContext } from "./DriverContext.js"
import type { Groups } from "./Groups.js"
import { type Objects, checkActorInfo } from "./Objects.js"

/** Where an argument moves over a two-sided transport: its group, the producer's rank and the consumer's. */
interface Route {
  readonly group: string
  readonly rank: number
  readonly toRank: number
}

export class Dispatch {
  private nextCall = 1

  private readonly directory: ObjectDirectory
  private readonly runtime: ProcessRuntime

  constructor(
    private readonly driver: DriverContext,
    private readonly processes: ActorProcesses,
    private readonly agents: AgentLinks,
    private readonly groups: Groups,
    private readonly objects: Objects,
  ) {
    this.directory = driver.directory
    this.runtime = driver.runtime
  }

  /** Submits a call of `method` on an actor: its ref at once; the call is sent once its turn and its arguments come. */
  readonly submit = (record: ActorRecord, method: string, args: ReadonlyArray<unknown>, options: CallOptions): ObjectRef<unknown> => {
    requireOpen(this.driver.identity)
    const transport = options.tensorTransport ?? methodOf(record.definition, method)?.options.tensorTransport ?? objectStoreName
    this.runtime.transport(transport)
    const encoded = encodeValue([...args], "argument")
    for (const ref of encoded.refs) requireUsableRef(ref, this.driver.identity)
    if (encoded.skeleton.byteLength > MAX_VALUE_BYTES) {
      throw tooLarge(`the arguments of ${record.id}.${method} (all but their tensors)`, encoded.skeleton.byteLength, MAX_VALUE_BYTES)
    }
    const argEntries = [...new Set(encoded.refs.map((r) => r.id))].map((id) => this.directory.require(id))
    const routes = new Map<string, Route>()
    for (const entry of argEntries) {
      // The producer has the very tensors; a receiver of a broadcast keeps its copy: no transfer either way.
      if (entry.producer === record.id || entry.copies.has(record.id)) continue
      this.processes.requireSameHost(entry.transport, [entry.producer, record.id])
      const capabilities = this.runtime.transport(entry.transport).capabilities
      if (capabilities.oneSided) continue
      const group = this.groups.groupOf(entry.transport, entry.producer, record.id)
      if (group === undefined) {
        throw new MissingGroupError({
          message: `${record.id} cannot receive ${entry.id} over "${entry.transport}" from ${entry.producer}: they share no ${entry.transport} group. Create one first: cluster.createCollectiveGroup([producer, consumer], { backend: "${entry.transport}" })`,
          backend: entry.transport,
        })
      }
      routes.set(entry.id, { group: group.name, rank: group.members.indexOf(entry.producer), toRank: group.members.indexOf(record.id) })
    }
    const entry = this.directory.create(this.runtime.newObjectId(), record.id, transport, method)
    const ref = new ObjectRef(entry.id, this.driver.tracker)
    const pinned = argEntries.map((e) => e.id)
    for (const id of pinned) this.directory.acquire(id)
    // An object still being made on a transport that matches transfers by object is sent as soon as
    // its producer registers it, not once the driver has heard of it and dispatched this call: the
    // producer's agent is told now and waits for it. Not behind calls still waiting to be sent: this
    // one's dispatch could then come long after the object, and the send's time limit runs from it.
    const behindOthers = record.undispatched > 0
    record.undispatched++
    const early = behindOthers
      ? []
      : argEntries.filter((e) => e.state === "pending" && routes.has(e.id) && this.runtime.transport(e.transport).capabilities.matchesByObject === true && !this.madeWhole(e))
    for (const e of early) {
      const route = routes.get(e.id)!
      this.startSend(e, route.group, record.id, route.toRank, true)
    }
    const callId = this.nextCall++
    const previous = record.dispatched
    // A call cancelled (or whose actor dies) before it is sent stops waiting at once, for the calls
    // before it and for its arguments; the calls behind it still wait for those before it.
    const ended = this.directory.wait(entry, Infinity)
    const dispatch = (async () => {
      await Promise.race([previous, ended])
      const args = Promise.all(argEntries.map((e) => this.directory.wait(e, Infinity)))
      await Promise.race([args, ended])
      if (entry.state !== "pending") throw entry.error!
      const ready = await args
      const failed = ready.find((e) => e.state === "failed")
      if (!record.alive) throw dead(record)
      if (failed !== undefined) throw failed.error!
      for (const e of ready) {
        const route = routes.get(e.id)
        // Whatever the size: an inline value would not need the group, a larger one could not be received without it.
        if (route !== undefined && !this.groups.has(route.group)) {
          throw new MissingGroupError({
            message: `${record.id} cannot receive ${e.id} over "${e.transport}": its group "${route.group}" was destroyed after the call was submitted`,
            backend: e.transport,
          })
        }
      }
      for (const e of ready) this.noteTaker(e, record.id)
      const refs: Array<ObjectInfo> = ready.map((e) => {
        const route = routes.get(e.id)
        return route === undefined ? e.info! : { ...e.info!, route: { group: route.group, rank: route.rank } }
      })
      record.inFlight.set(callId, { entry, method, pinned })
      const frees = this.objects.takeFrees(record)
      try {
        record.control.send(
          {
            _tag: "Call",
            callId,
            method,
            returnId: entry.id,
            ...(options.tensorTransport !== undefined ? { transport: options.tensorTransport } : {}),
            args: encoded.skeleton,
            argTensors: writeMetas(encoded.tensors),
            refs,
            ...(frees !== undefined ? { frees } : {}),
          } satisfies ToActor,
          encoded.tensors.map((t) => t.contiguousBytes()),
        )
      } catch (error) {
        // Nothing was written (a message over the limit): the frees go in the next message instead.
        if (frees !== undefined) this.objects.giveBackFrees(record, frees)
        throw withSmallObjects(error, ready.filter((e) => e.info!.inline !== undefined).length)
      }
      for (const e of ready) {
        const route = routes.get(e.id)
        if (route === undefined) continue
        const sentEarly = early.some((x) => x.id === e.id)
        // A value without tensors, or small enough to travel inline, is whole in its info: there is
        // nothing to send, and the producer never registers it, so a send asked for early would wait
        // for it forever.
        if (travelsWhole(e.info!)) {
          if (sentEarly) this.cancelSend(e, record.id)
        } else if (!sentEarly) this.startSend(e, route.group, record.id, route.toRank, false)
      }
    })()
      .catch((error: Error) => {
        for (const e of early) this.endEarlySend(e, record, routes.get(e.id)!)
        record.inFlight.delete(callId)
        this.directory.fail(entry, error)
        this.unpin(pinned)
      })
      .finally(() => {
        record.undispatched--
      })
    record.dispatched = Promise.all([previous, dispatch]).then(() => undefined)
    return ref
  }

  /** A call's result (or failure), with the transfers its actor made for it. */
  result(record: ActorRecord, message: Extract<FromActor, { _tag: "Result" }>): void {
    const call = record.inFlight.get(message.callId)
    if (call === undefined) return
    record.inFlight.delete(message.callId)
    for (const stat of message.transfers) this.driver.recordTransfer(stat)
    if (call.entry.state === "pending" && message.info !== undefined) {
      try {
        checkActorInfo(record.id, message.info, call.entry.id)
      } catch (refused) {
        this.directory.fail(call.entry, refused as Error)
      }
    }
    if (call.entry.state !== "pending") {
      // Cancelled while it ran, or refused: whatever it made is nobody's.
      if (message.info !== undefined && metaCount(message.info.tensors) > 0) record.control.send({ _tag: "Free", objectIds: [call.entry.id] } satisfies ToActor)
    } else if (message.info !== undefined) {
      if (travelsWhole(message.info)) record.wholeResults.add(call.method)
      else record.wholeResults.delete(call.method)
      this.directory.ready(call.entry, message.info)
    }
    else this.directory.fail(call.entry, fromWireError(message.error!, { actor: record.id, method: call.method }))
    this.unpin(call.pinned)
  }

  /** `cluster.cancel`: the call that makes the entry's object fails with CancelledError; a sent one is told to stop. */
  cancel(ref: ObjectRef<unknown>): void {
    const entry = this.directory.get(ref.id)
    if (entry?.state !== "pending") return
    const record = this.processes.get(entry.producer)!
    const sent = [...record.inFlight].find(([, call]) => call.entry === entry)
    this.directory.fail(entry, new CancelledError({ message: `the call of ${record.id} that makes ${ref} was cancelled`, objectId: ref.id }))
    if (sent !== undefined) record.control.send({ _tag: "Cancel", callId: sent[0] } satisfies ToActor)
  }

  /** Fails the calls a dead actor was running. */
  actorDied(record: ActorRecord, died: ActorDiedError): void {
    for (const call of record.inFlight.values()) {
      this.directory.fail(call.entry, died)
      this.unpin(call.pinned)
    }
    record.inFlight.clear()
  }

  /**
   * Warns, once per object, when calls of its producer and of another actor both take it: the
   * producer's call gets the very tensors, the other a copy made whenever its transfer runs, so an
   * in-place change by the producer's call may or may not reach it.
   */
  private noteTaker(entry: Entry, actor: string): void {
    const shared = () => entry.takers.has(entry.producer) && entry.takers.size >= 2
    const wasShared = shared()
    entry.takers.add(actor)
    if (wasShared || !shared() || metaCount(entry.info!.tensors) === 0) return
    const others = [...entry.takers].filter((a) => a !== entry.producer).join(", ")
    process.emitWarning(
      `object ${entry.id} is passed to ${entry.producer}, its producer, and to ${others}: objects are mutable, so ${entry.producer}'s call works on the very tensors that ${others} receive${entry.takers.size > 2 ? "" : "s"} a copy of whenever the transfer runs, and an in-place change there may or may not reach ${others}. Change a clone instead (t.clone()), or wait for the other calls first.`,
      { type: "TensorlaneMutabilityWarning", code: "TENSORLANE_SHARED_MUTABLE_OBJECT" },
    )
  }

  private unpin(ids: ReadonlyArray<string>): void {
    for (const id of ids) this.directory.release(id)
  }

  /**
   * Whether the method making a pending object made its last result whole in its info (small values
   * travel inline): most often so again, and a send asked for early would only be cancelled, two
   * messages to the producer's agent for nothing. A larger result is then sent once the call that
   * takes it is dispatched.
   */
  private madeWhole(entry: Entry): boolean {
    return entry.method !== undefined && this.processes.get(entry.producer)?.wholeResults.has(entry.method) === true
  }

  /**
   * The producer's half of a two-sided transfer, run by its agent even while its main thread is busy;
   * `whenRegistered`: the object is still being made, and the agent waits for it.
   */
  private startSend(entry: Entry, group: string, to: string, toRank: number, whenRegistered: boolean): void {
    const producer = this.processes.get(entry.producer)
    if (producer === undefined) return
    this.agents
      .request(producer, {
        _tag: "Send",
        objectId: entry.id,
        transport: entry.transport,
        group,
        to,
        toRank,
        timeoutMs: this.driver.transferTimeoutMs,
        ...(whenRegistered ? { whenRegistered } : {}),
      })
      .catch(() => {
        // The receiver fails by itself: its own timeout, or PeerDied should the producer die.
      })
  }

  /**
   * A send asked for early whose consumer's call will not be sent. While its object is not made the
   * send only waits, and is cancelled; once the object exists the send may be posted, and a posted
   * two-sided send cannot be taken back: the consumer takes the object in as a copy instead (kept
   * until the object is freed, and used by its later calls), so that nothing stays posted.
   */
  private endEarlySend(entry: Entry, consumer: ActorRecord, route: Route): void {
    if (entry.state !== "ready" || travelsWhole(entry.info!) || !consumer.alive) {
      this.cancelSend(entry, consumer.id)
      return
    }
    this.directory.acquire(entry.id)
    this.objects
      .prefetch(consumer, entry, { ...entry.info!, route: { group: route.group, rank: route.rank } }, false)
      .catch(() => {
        // Its own failure (the consumer died, the group broke) ends the send as well.
      })
      .finally(() => this.directory.release(entry.id))
  }

  /** Ends a send asked for early that will not happen: its consumer's call was never sent, or its object travels whole in its info. */
  private cancelSend(entry: Entry, to: string): void {
    const producer = this.processes.get(entry.producer)
    if (!producer?.alive) return
    this.agents.post(producer, { _tag: "CancelSend", objectId: entry.id, transport: entry.transport, to }).catch(() => undefined)
  }
}

/**
 * A call's message over the limit names the small objects among its refs, whose bytes it carries
 * (about a thousand of 64 KiB fill a message) and which no other way of passing them avoids.
 */
const withSmallObjects = (error: unknown, small: number): unknown =>
  error instanceof MessageTooLargeError && small > 0
    ? new MessageTooLargeError({
        message: `${error.message}; its ${small} small objects (64 KiB or less each) travel inside the call's message. Pass fewer of them per call, or have their producers return them together in larger tensors`,
        bytes: error.bytes,
        limit: error.limit,
      })
    : error

/** An object whose info carries all of it (no tensors, or their bytes inline): no transfer moves it. */
const travelsWhole = (info: ObjectInfo): boolean => metaCount(info.tensors) === 0 || info.inline !== undefined
