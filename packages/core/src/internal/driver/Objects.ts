/**
 * The driver as the owner of every object, around its object directory: frees reach every process
 * that holds a copy; the driver's own `get`, `put` and `broadcast`; the actors' puts, resolves and
 * borrows; and what an actor's death does to the objects it produced and borrowed.
 */
import { type ActorDiedError, MissingGroupError, ObjectLostError, ObjectFreedError, ProtocolError, TimeoutError, UnsupportedOperationError } from "../../Errors.js"
import type { GetOptions, PutOptions } from "../../InActor.js"
import { ObjectRef } from "../../ObjectRef.js"
import type { FromActor, ObjectInfo, ToActor } from "../messages.js"
import type { Entry } from "../objectDirectory.js"
import { objectStoreName } from "../transportRegistry.js"
import { toWireError } from "../wireError.js"
import { metaCount } from "../wireMetas.js"
import type { ActorProcesses, ActorRecord } from "./ActorProcesses.js"
import type { AgentLinks } from "./AgentLinks.js"
import type { DriverContext } from "./DriverContext.js"
import type { Groups } from "./Groups.js"

/** The most object ids in one Free message. */
const FREES_PER_MESSAGE = 4096

export class Objects {
  /**
   * Frees to send, per process, gathered until the event loop's next turn: the many frees one
   * garbage collection brings at once (refs left to it) go to each producer as one message, not one
   * each, and a call sent to that process meanwhile carries them (one message fewer per call of a
   * loop that releases its refs). Nothing waits for a free, so none is sent at once.
   */
  private readonly frees = new Map<ActorRecord, Array<string>>()

  constructor(
    private readonly driver: DriverContext,
    private readonly processes: ActorProcesses,
    private readonly agents: AgentLinks,
    private readonly groups: Groups,
  ) {}

  /** The directory's free: the producer drops its primary copy, and every holder of a received copy drops that. */
  free(entry: Entry): void {
    if (entry.info === undefined || metaCount(entry.info.tensors) === 0) return
    for (const id of entry.copies) {
      const holder = this.processes.get(id)
      if (holder !== undefined) this.sendFree(holder, entry.id)
    }
    if (entry.producer === "driver") {
      this.driver.runtime.free([entry.id]).catch((error) => console.error("tensorlane: free failed:", error))
      return
    }
    const producer = this.processes.get(entry.producer)
    if (producer !== undefined) this.sendFree(producer, entry.id)
  }

  private sendFree(record: ActorRecord, objectId: string): void {
    const ids = this.frees.get(record)
    if (ids !== undefined) {
      ids.push(objectId)
      return
    }
    if (this.frees.size === 0) setImmediate(() => this.flushFrees())
    this.frees.set(record, [objectId])
  }

  /** The frees gathered for `record`, taken by a call about to be sent to it (none past one message's worth). */
  takeFrees(record: ActorRecord): ReadonlyArray<string> | undefined {
    const ids = this.frees.get(record)
    if (ids === undefined || ids.length > FREES_PER_MESSAGE) return undefined
    this.frees.delete(record)
    return ids
  }

  /** Frees a call took for a message that could not be sent: they go as if it had not taken them. */
  giveBackFrees(record: ActorRecord, ids: ReadonlyArray<string>): void {
    for (const id of ids) this.sendFree(record, id)
  }

  /** Sends the frees gathered so far; at shutdown, before the processes are told to end. */
  flushFrees(): void {
    for (const [record, ids] of this.frees) {
      if (!record.alive) continue
      for (let i = 0; i < ids.length; i += FREES_PER_MESSAGE) {
        record.control.send({ _tag: "Free", objectIds: ids.slice(i, i + FREES_PER_MESSAGE) } satisfies ToActor)
      }
    }
    this.frees.clear()
  }

  /** Resolves refs to their values in the driver. */
  get(refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>, options: GetOptions): Promise<unknown> {
    return this.driver.runtime.get(
      refs,
      options,
      this.driver.transferTimeoutMs,
      async (ref, remainingMs) => {
        const pending = this.driver.directory.require(ref.id)
        // The object stays alive while this get needs it, even if the caller drops its ref meanwhile.
        this.driver.directory.acquire(pending.id)
        const done = () => this.driver.directory.release(pending.id)
        try {
          const entry = await this.driver.directory.wait(pending, remainingMs).catch((error) => {
            throw error instanceof TimeoutError
              ? new TimeoutError({ message: `get of ${ref} did not complete within ${options.timeoutMs} ms`, timeoutMs: options.timeoutMs! })
              : error
          })
          if (entry.state === "failed") throw entry.error!
          if (options.useObjectStore !== true) this.processes.requireSameHost(entry.transport, [entry.producer, "driver"])
          return { info: entry.info!, done }
        } catch (error) {
          done()
          throw error
        }
      },
      this.driver.recordTransfer,
    )
  }

  /** Stores a value in the driver for actors to read (object-store or a one-sided transport). */
  async put<T>(value: T, options: PutOptions): Promise<ObjectRef<T>> {
    const transport = options.tensorTransport ?? objectStoreName
    if (!this.driver.runtime.transport(transport).capabilities.oneSided) {
      throw new UnsupportedOperationError({
        message: `put with the two-sided transport "${transport}" is not possible: a two-sided transfer needs both ends in a collective group, and the driver is in none. Use a one-sided transport (or object-store), or return the value from an actor method.`,
      })
    }
    const id = this.driver.runtime.newObjectId()
    const info = await this.driver.runtime.produce(id, value, transport, "put")
    const entry = this.driver.directory.create(id, "driver", transport)
    const ref = new ObjectRef<T>(id, this.driver.tracker)
    this.driver.directory.ready(entry, info)
    return ref
  }

  /** `cluster.broadcast`: a received copy of the object in each receiver, kept until the object is freed. */
  async broadcast(entry: Entry, receiving: ReadonlyArray<ActorRecord>, limitMs: number | undefined): Promise<void> {
    this.driver.directory.acquire(entry.id)
    try {
      const ready = await this.driver.directory.wait(entry, limitMs ?? Infinity)
      if (ready.state === "failed") throw ready.error!
      const info = ready.info!
      const records = receiving.filter((r) => r.id !== entry.producer && !entry.copies.has(r.id))
      this.processes.requireSameHost(entry.transport, [entry.producer, ...records.map((r) => r.id)])
      const transport = this.driver.runtime.transport(entry.transport)
      const timeoutMs = limitMs ?? this.driver.transferTimeoutMs
      if (transport.capabilities.oneSided) {
        await settleAll(records.map((r) => this.prefetch(r, entry, info, false)))
        return
      }
      const group = this.groups.groupOf(entry.transport, entry.producer, ...records.map((r) => r.id))
      if (group === undefined) {
        throw new MissingGroupError({
          message: `no ${entry.transport} group holds ${entry.producer} and every receiver; create one with cluster.createCollectiveGroup`,
          backend: entry.transport,
        })
      }
      const root = group.members.indexOf(entry.producer)
      const routed = { ...info, route: { group: group.name, rank: root } }
      // Its bytes are in its info: each receiver takes its copy from there, and the producer sends nothing.
      if (info.inline !== undefined) {
        await settleAll(records.map((r) => this.prefetch(r, entry, routed, false)))
        return
      }
      const whole = transport.broadcast !== undefined && group.members.length === records.length + 1
      const producer = this.processes.get(entry.producer)!
      const sends = whole
        ? [this.agents.request(producer, { _tag: "Broadcast", objectId: entry.id, group: group.name, root, timeoutMs })]
        : records.map((r) =>
            this.agents.request(producer, {
              _tag: "Send",
              objectId: entry.id,
              transport: entry.transport,
              group: group.name,
              to: r.id,
              toRank: group.members.indexOf(r.id),
              timeoutMs,
            }),
          )
      await settleAll([...records.map((r) => this.prefetch(r, entry, routed, whole)), ...sends])
    } finally {
      this.driver.directory.release(entry.id)
    }
  }

  /** Has an actor receive an object ahead of the calls that use it and keep the copy until the object is freed. */
  async prefetch(record: ActorRecord, entry: Entry, info: ObjectInfo, collective: boolean): Promise<void> {
    const reply = await this.processes.request(record, (reqId) => ({ _tag: "Prefetch", reqId, info, collective }), "Prefetched")
    for (const stat of reply.transfers) this.driver.recordTransfer(stat)
    // A copy counts once it is there; one that outlived its object is freed at once.
    if (this.driver.directory.get(entry.id) === entry) entry.copies.add(record.id)
    else record.control.send({ _tag: "Free", objectIds: [entry.id] } satisfies ToActor)
  }

  /** An object an actor put: the driver owns it from now on, and the actor's handle counts as a borrow. */
  actorPut(record: ActorRecord, message: Extract<FromActor, { _tag: "Put" }>): void {
    let error: Error | undefined
    try {
      checkActorInfo(record.id, message.info)
      if (this.driver.directory.get(message.info.objectId) !== undefined) {
        throw new ProtocolError({ message: `${record.id} put an object under an id in use: ${message.info.objectId}` })
      }
      const entry = this.driver.directory.create(message.info.objectId, record.id, message.info.transport)
      this.driver.directory.acquire(entry.id, record.id)
      this.driver.directory.ready(entry, message.info)
    } catch (refused) {
      error = refused as Error
    }
    record.control.send({ _tag: "PutAck", reqId: message.reqId, ...(error ? { error: toWireError(error) } : {}) } satisfies ToActor)
  }

  /** An actor's `get`: the object's info once it is ready, or why it will never be. */
  resolveFor(record: ActorRecord, message: Extract<FromActor, { _tag: "Resolve" }>): void {
    const reply = (info: ObjectInfo | undefined, error: Error | undefined) =>
      record.control.send({
        _tag: "Resolved",
        reqId: message.reqId,
        ...(info ? { info } : {}),
        ...(error ? { error: toWireError(error) } : {}),
      } satisfies ToActor)
    const entry = this.driver.directory.get(message.objectId)
    if (entry === undefined) {
      reply(undefined, new ObjectFreedError({ message: `object ${message.objectId} was released`, objectId: message.objectId }))
      return
    }
    this.driver.directory.acquire(entry.id)
    this.driver.directory
      .wait(entry, message.timeoutMs ?? Infinity)
      .then(
        (e) => (e.state === "ready" ? reply(e.info, undefined) : reply(undefined, e.error)),
        (error) => reply(undefined, error),
      )
      .finally(() => this.driver.directory.release(entry.id))
  }

  /** An actor's first handle of an object acquires a borrow, its last one dropped releases it. */
  borrows(record: ActorRecord, message: Extract<FromActor, { _tag: "AddRefs" | "DropRefs" }>): void {
    for (const id of message.objectIds) {
      if (message._tag === "AddRefs") this.driver.directory.acquire(id, record.id)
      else this.driver.directory.release(id, record.id)
    }
  }

  /** A dead actor's objects fail (but values small enough to travel inline, whose bytes the driver holds), and its borrows end. */
  actorDied(actorId: string, died: ActorDiedError, host: string | undefined): void {
    for (const entry of this.driver.directory.values()) {
      if (entry.producer !== actorId) continue
      // Values that travelled inline, whose bytes the driver holds, stay readable.
      if (entry.state !== "pending" && entry.info?.inline !== undefined) continue
      const lost =
        entry.state !== "pending" && host !== undefined
          ? new ObjectLostError({ message: `object ${entry.id} was on host ${host} with its producer ${actorId}, which died: ${died.message}`, objectId: entry.id, host })
          : died
      this.driver.directory.fail(entry, lost)
    }
    this.driver.directory.dropBorrower(actorId)
  }
}

/** The number in an object id a process made, `${processId}.n`. */
const OBJECT_NUMBER = /^[1-9][0-9]*$/

/**
 * An object an actor describes (its call's result or a put) is its own: under the actor's own ids
 * (`${actorId}.n`) for a put, under the id its call was given for a result; else ProtocolError. (Its
 * size is checked as it arrives: ActorProcesses.)
 */
export const checkActorInfo = (actorId: string, info: ObjectInfo, objectId?: string): void => {
  const owned =
    objectId === undefined
      ? info.objectId.startsWith(`${actorId}.`) && OBJECT_NUMBER.test(info.objectId.slice(actorId.length + 1))
      : info.objectId === objectId
  if (info.producer !== actorId || !owned) {
    throw new ProtocolError({ message: `${actorId} described an object it does not own: ${info.objectId} of ${info.producer}` })
  }
}

/** Waits for every promise, then fails with the first failure: nothing is left running behind an early rejection. */
const settleAll = async (promises: ReadonlyArray<Promise<unknown>>): Promise<void> => {
  const failed = (await Promise.allSettled(promises)).find((r): r is PromiseRejectedResult => r.status === "rejected")
  if (failed !== undefined) throw failed.reason
}
