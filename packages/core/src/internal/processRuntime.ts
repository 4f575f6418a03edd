/**
 * What every process of a cluster does with objects, driver and actors alike: turn a value into a
 * stored object (producing), and turn an owner's ObjectInfo back into a value (consuming).
 */
import * as v8 from "node:v8"
import { DeviceError, InvalidArgumentError, ProtocolError, UnsupportedOperationError } from "../Errors.js"
import type { GetOptions } from "../InActor.js"
import { type ClusterIdentity, type ObjectRef, isObjectRef, requireRefOf, requireUsableRef } from "../ObjectRef.js"
import { type Tensor, isTensor } from "../Tensor.js"
import { TensorStore } from "../TensorStore.js"
import type { PromiseTransport } from "../Transport.js"
import type { ClusterMember } from "./agent/Agent.js"
import type { AgentEvent } from "./agent/Memberships.js"
import { Fetches } from "./fetches.js"
import { AgentClient, type Transfer } from "./agentClient.js"
import { MAX_VALUE_BYTES, tooLarge } from "./frame.js"
import type { ActorInspection, ObjectInfo, TransferStat } from "./messages.js"
import { PendingTransfers } from "./pendingTransfers.js"
import { notPacked, packTensors, packable, packedIndices, packedMask, packingOf, receivingBlocks, travelMetas, unpackTensors } from "./packing.js"
import { BufferUse, quarantine } from "./quarantine.js"
import { type ReceiveObject, receiveLabel, receiveObject } from "./receiveObject.js"
import { allocateFor, checkReceived, concatBytes, tensorsFromBytes } from "./tensorMeta.js"
import { loadTransports, objectStoreName, promiseFaces, unknownTransport } from "./transportRegistry.js"
import { decodeValue, encodeValue } from "./valueCodec.js"
import { settledWithin } from "./waits.js"
import { metaCount, readMetas, writeMetas } from "./wireMetas.js"
import { toWireTensor } from "./wireTensor.js"
import { checkTimeout, describe } from "./arguments.js"

/** Values up to this many tensor bytes in host memory travel inside the owner's messages (`inlinesSmallValues`). */
const INLINE_LIMIT = 64 * 1024

/** How long shutdown waits: for an actor to exit, and in every process for the releases under way. */
export const SHUTDOWN_GRACE_MS = 2_000

/** Where `get` finds an object: its info, and what to do once its value is resolved. */
export interface Located {
  readonly info: ObjectInfo
  readonly done?: () => void
}

export interface ResolveOptions {
  readonly useObjectStore?: boolean
  /** Receive as a member of a collective broadcast of the object to the route's whole group. */
  readonly collective?: boolean
  /** Tensors to receive into, in the value's tensor order (depth first, insertion order). */
  readonly target?: ReadonlyArray<Tensor>
  readonly timeoutMs: number
}

export interface Resolved {
  readonly value: unknown
  /** Set when the tensors were copies received here (to be dropped from the store when no longer used). */
  readonly received: boolean
  readonly tensors: ReadonlyArray<Tensor>
  readonly stat: TransferStat | undefined
}

/** What starting the runtime of a process (the driver, or an actor) takes. */
export interface RuntimeStart {
  readonly processId: string
  readonly cluster: ClusterIdentity
  /** Where its agent listens (on one machine). */
  readonly address: string
  /** The member of a cluster across hosts it is (a host, or the driver). */
  readonly member: ClusterMember | undefined
  /** Transport specifiers, loaded by both threads. */
  readonly transports: ReadonlyArray<string>
  /** The driver's pid in actors, whose agent ends the process once the driver is gone. */
  readonly parentPid: number | undefined
  readonly makeRef: (objectId: string) => ObjectRef<unknown>
  /** Hears of the groups the process is a member of, whenever they change. */
  readonly onEvent?: (event: AgentEvent) => void
  readonly whileReceiving?: () => void
}

export class ProcessRuntime {
  private nextObject = 1
  /** Receives this thread runs itself (transports that work on any thread). */
  private readonly pending = new PendingTransfers()
  /** Frees under way, as promises that settle with them and never fail. */
  private readonly freeing = new Set<Promise<void>>()
  /** Small object-store values held here: stored without a registration, so the agent never heard of them. */
  private readonly inlineHeld = new Set<string>()

  constructor(
    readonly processId: string,
    /** The cluster this process belongs to: refs of another cluster are refused. */
    readonly cluster: ClusterIdentity,
    readonly agent: AgentClient,
    readonly store: TensorStore,
    /** What this thread calls for each transport: its Promise face (`promiseFace`). */
    readonly transports: ReadonlyMap<string, PromiseTransport>,
    /** Builds a ref handle of this process for an object id found inside a value. */
    readonly makeRef: (objectId: string) => ObjectRef<unknown>,
    /** This thread's object-store fetches, closed with it. */
    private readonly fetches: Fetches,
    /** Runs once a transfer into this process is under way and this thread only waits for it. */
    private readonly whileReceiving: () => void = () => {},
  ) {}

  /**
   * Starts a process's runtime: the main thread's transports and its agent, which loads its own, at
   * once. Both threads need them. The agent sends, runs collectives and groups, and receives over
   * transports that work on one thread only. The main thread reads their capabilities before any
   * message goes out, registers and receives over those that work on any thread without a round trip
   * to its agent, and allocates the tensors a transfer fills with the allocators a transport module
   * registers as it loads (transport-nccl's CUDA memory). A thread imports each module once.
   */
  static async start(options: RuntimeStart): Promise<ProcessRuntime> {
    const fetches = Fetches.of(options.member)
    const [loaded, started] = await Promise.allSettled([
      loadTransports(options.transports, {
        fetchFrom: (r) => fetches.fetch(r.producerAddress, r.objectId, r.tensors, r.into, r.signal, r.writesUntil),
      }),
      AgentClient.start(
        { processId: options.processId, address: options.address, cluster: options.member, transports: options.transports, parentPid: options.parentPid },
        options.onEvent ?? (() => undefined),
      ),
    ])
    if (loaded.status === "rejected") {
      if (started.status === "fulfilled") await started.value.close()
      throw loaded.reason
    }
    if (started.status === "rejected") throw started.reason
    const [transports, agent] = [loaded.value, started.value]
    return new ProcessRuntime(options.processId, options.cluster, agent, new TensorStore(), promiseFaces(transports), options.makeRef, fetches, options.whileReceiving)
  }

  transport(name: string): PromiseTransport {
    if (typeof name !== "string") throw new InvalidArgumentError({ message: `a tensor transport is named by a string, not ${describe(name)}`, argument: "tensorTransport" })
    const transport = this.transports.get(name)
    if (transport === undefined) throw unknownTransport(name, this.transports.keys())
    return transport
  }

  newObjectId(): string {
    return `${this.processId}.${this.nextObject++}`
  }

  /**
   * Stores a value produced here under `objectId` and describes it for the owner. The store keeps the
   * very tensors (objects are mutable and shared by reference, whatever the transport); small values
   * in host memory of transports that inline them also travel inline, as a copy taken now, for other
   * consumers. A `put` value's refs must be live refs of this cluster; a method's result may name refs
   * the method released on its way out (the owner hears of the result before the release).
   */
  async produce(objectId: string, value: unknown, transportName: string, role: "result" | "put"): Promise<ObjectInfo> {
    const transport = this.transport(transportName)
    const { skeleton, tensors, refs } = encodeValue(value, role === "put" ? "the put value" : "the result")
    for (const ref of refs) {
      if (role === "put") requireUsableRef(ref, this.cluster)
      else requireRefOf(ref, this.cluster)
    }
    for (const t of tensors) {
      const kind = t.device === "cpu" ? "cpu" : "cuda"
      if (!transport.capabilities.devices.includes(kind)) {
        throw new DeviceError({
          message: `a tensor on ${t.device} cannot travel over "${transport.name}", which moves ${transport.capabilities.devices.join(", ")} memory`,
          device: t.device,
          transport: transport.name,
        })
      }
    }
    const base = {
      objectId,
      producer: this.processId,
      producerAddress: this.agent.address,
      transport: transportName,
      skeleton,
      tensors: writeMetas(tensors),
      refs: refs.map((r) => r.id),
    }
    if (tensors.length === 0) return checkDescribed(base)
    if (transport.capabilities.inlinesSmallValues === true && tensors.every((t) => t.device === "cpu")) {
      const total = tensors.reduce((n, t) => n + t.nbytes, 0)
      if (total <= INLINE_LIMIT) {
        const info = checkDescribed({ ...base, inline: concatBytes(tensors, total) })
        // Kept as well: a ref passed back to this process must hand over these very tensors.
        this.store.addPrimary({ objectId, transport: transportName, value, tensors, travelling: tensors })
        this.inlineHeld.add(objectId)
        return info
      }
    }
    const packed = packable(tensors, transport.registered && ((storage) => transport.registered!(storage)))
    const described = checkDescribed(packed === undefined ? base : { ...base, packed: packedMask(packed, tensors.length) })
    const travelling = packed === undefined ? tensors : packTensors(tensors, packingOf(tensors, packed))
    const metadata = await this.hold(objectId, transportName, value, tensors, travelling)
    if (metadata === undefined) return described
    try {
      return checkDescribed({ ...described, metadata })
    } catch (error) {
      await this.free([objectId])
      throw error
    }
  }

  /**
   * Whether this thread registers objects of `transport` itself (and so answers at once) instead of
   * asking its agent: transports that work on any thread, and those with nothing to register.
   */
  private registersHere(transport: PromiseTransport): boolean {
    return transport.capabilities.anyThread === true || (transport.extractMetadata === undefined && transport.release === undefined)
  }

  private async hold(objectId: string, transportName: string, value: unknown, tensors: ReadonlyArray<Tensor>, travelling: ReadonlyArray<Tensor>): Promise<unknown> {
    const transport = this.transport(transportName)
    this.store.addPrimary({ objectId, transport: transportName, value, tensors, travelling })
    const wire = travelling.map(toWireTensor)
    try {
      if (!this.registersHere(transport)) {
        return await this.agent.command({ op: "register", objectId, transport: transportName, tensors: wire, registeredByMain: false })
      }
      const metadata = await transport.extractMetadata?.({ objectId, tensors: travelling })
      // Nothing comes back to wait for: the agent takes the registration in before any request for
      // the object (Agent.heldObject).
      this.agent
        .command({ op: "register", objectId, transport: transportName, tensors: wire, registeredByMain: true })
        .catch(warnUnanswered(`${objectId} cannot be served`))
      return metadata
    } catch (error) {
      this.store.freePrimary(objectId)
      throw error
    }
  }

  /** Frees primary copies the owner no longer needs, and what their transports registered. */
  free(objectIds: ReadonlyArray<string>): Promise<void> {
    const freed = this.freeObjects(objectIds)
    const settled = freed.then(
      () => undefined,
      () => undefined,
    )
    this.freeing.add(settled)
    void settled.then(() => this.freeing.delete(settled))
    return freed
  }

  /** The frees under way (they never fail: their callers hear of failures). */
  get freesUnderWay(): ReadonlyArray<Promise<void>> {
    return [...this.freeing]
  }

  private async freeObjects(objectIds: ReadonlyArray<string>): Promise<void> {
    for (const id of objectIds) this.store.unpinReceived(id)
    const held = objectIds.filter((id) => this.store.getPrimary(id) !== undefined)
    if (held.length === 0) return
    const registered = held.filter((id) => !this.inlineHeld.delete(id))
    const released = registered.length > 0 ? this.agent.command({ op: "release", objectIds: registered }) : Promise.resolve(undefined)
    // The store keeps the tensors (and so their memory) until the transports let go of what they registered.
    const byAgent = held.filter((id) => !this.registersHere(this.transport(this.store.getPrimary(id)!.transport)))
    const failures: Array<unknown> = []
    const agentHolds = new Set(byAgent)
    for (const id of held.filter((id) => !agentHolds.has(id))) {
      const stored = this.store.getPrimary(id)!
      await Promise.resolve(this.transport(stored.transport).release?.({ objectId: id, tensors: stored.travelling })).catch((e: unknown) => failures.push(e))
      this.store.freePrimary(id)
    }
    if (byAgent.length === 0) released.catch(warnUnanswered(`releasing ${held.join(", ")} failed`))
    else {
      try {
        await released
      } finally {
        for (const id of byAgent) this.store.freePrimary(id)
      }
    }
    if (failures.length > 0) throw failures[0]
  }

  /** Ends this thread's own transfers with a peer that died (the agent ends its own). */
  peerDied(peer: string): void {
    this.pending.peerDied(peer)
  }

  /** What this process holds, for `cluster.inspect()`: its store, and the transfers and registrations of both its threads. */
  async inspect(): Promise<ActorInspection> {
    const agent = await this.agent.command<{ pendingTransfers: Array<string>; registrations: Array<string>; groups: Array<string> }>({ op: "inspect" })
    const processWide = [...this.transports.values()].filter((t) => t.capabilities.anyThread).flatMap((t) => t.inspect?.().registrations ?? [])
    return {
      ...this.store.inspect(),
      pendingTransfers: [...this.pending.labels(), ...agent.pendingTransfers],
      registrations: [...processWide, ...agent.registrations],
      groups: agent.groups,
    }
  }

  /**
   * Lets the releases under way finish (a transport's release may be async, and its transport must
   * not close under it), then ends this thread's transfers, lets its transports go, stops the agent.
   */
  async close(): Promise<void> {
    await settledWithin(this.freesUnderWay, SHUTDOWN_GRACE_MS)
    this.pending.abortAll("the process is closing")
    for (const transport of this.transports.values()) if (transport.capabilities.anyThread) await transport.close?.()
    this.fetches.close()
    await this.agent.close()
  }

  /**
   * `get` of one ref or a list, in the driver or in an actor: `locate` finds each object (waiting until
   * it is ready, within the time left); `target` tensors are handed out in the values' tensor order;
   * `transferred` hears of every transfer it made.
   */
  async get(
    refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>,
    options: GetOptions,
    transferTimeoutMs: number,
    locate: (ref: ObjectRef<unknown>, remainingMs: number) => Promise<Located>,
    transferred: (stat: TransferStat) => void,
  ): Promise<unknown> {
    const list = refList(refs)
    for (const ref of list) requireUsableRef(ref, this.cluster)
    const deadline = performance.now() + (checkTimeout(options.timeoutMs, "timeoutMs") ?? Infinity)
    if (options.target !== undefined && (!Array.isArray(options.target) || !options.target.every(isTensor))) {
      throw new InvalidArgumentError({ message: `target must be an array of tensors, not ${describe(options.target)}`, argument: "target" })
    }
    const remaining = () => Math.max(0, deadline - performance.now())
    const values: Array<unknown> = []
    let targetOffset = 0
    for (const ref of list) {
      const { info, done } = await locate(ref, remaining())
      try {
        const count = metaCount(info.tensors)
        const target = options.target?.slice(targetOffset, targetOffset + count)
        targetOffset += count
        const resolved = await this.resolve(info, {
          timeoutMs: Math.min(transferTimeoutMs, Math.max(1, remaining())),
          ...(options.useObjectStore !== undefined ? { useObjectStore: options.useObjectStore } : {}),
          ...(target !== undefined ? { target } : {}),
        })
        values.push(resolved.value)
        if (resolved.stat !== undefined) transferred(resolved.stat)
      } finally {
        done?.()
      }
    }
    return isObjectRef(refs) ? values[0] : values
  }

  /** Turns an owner's ObjectInfo into a value here: the same tensors, inline bytes, or a transfer. */
  async resolve(info: ObjectInfo, options: ResolveOptions): Promise<Resolved> {
    const metas = readMetas(info.tensors)
    const packing = info.packed === undefined ? undefined : packingOf(metas, packedIndices(info.packed, metas.length))
    const build = (tensors: ReadonlyArray<Tensor>) =>
      decodeValue(info.skeleton, { tensors, ref: (id) => (info.refs.includes(id) ? this.makeRef(id) : unlistedRef(id, info.objectId)) })
    if (info.producer === this.processId) {
      const stored = this.store.getPrimary(info.objectId)
      if (stored !== undefined && options.target === undefined) {
        return { value: stored.value, received: false, tensors: stored.tensors, stat: undefined }
      }
    }
    const pinned = this.store.pinnedValue(info.objectId)
    if (pinned !== undefined && options.target === undefined) {
      return { value: pinned.value, received: true, tensors: pinned.tensors, stat: undefined }
    }
    if (options.target !== undefined) checkReceived(metas, options.target)
    if (metas.length === 0) return { value: build([]), received: false, tensors: [], stat: undefined }
    const transport = this.transport(info.transport)
    const via = options.useObjectStore ? objectStoreName : info.transport
    // Whether its bytes happen to travel inline or not, a two-sided object reaches members of its group only.
    if (!options.useObjectStore && !transport.capabilities.oneSided && info.route === undefined) {
      throw new UnsupportedOperationError({
        message: `get of an object on the two-sided transport "${info.transport}" needs { useObjectStore: true } (a copy through the control plane): only members of its collective group can receive it over ${info.transport}`,
      })
    }
    if (info.inline !== undefined) {
      const into = tensorsFromBytes(metas, info.inline, `object ${info.objectId}`, options.target)
      return { value: build(into), received: true, tensors: into, stat: undefined }
    }
    if (options.target !== undefined && !this.transport(via).capabilities.receiveIntoBuffers) {
      throw new UnsupportedOperationError({ message: `transport "${via}" cannot receive into target buffers` })
    }
    const into =
      packing === undefined
        ? (options.target ?? allocateFor(metas))
        : [...receivingBlocks(packing), ...(options.target !== undefined ? notPacked(options.target, packing) : allocateFor(notPacked(metas, packing)))]
    const travels = packing === undefined ? metas : travelMetas(metas, packing)
    const request = { info, tensors: travels, via, into, consumer: this.processId, collective: options.collective ?? false }
    const viaTransport = this.transport(via)
    const started = performance.now()
    // A collective receive stays with the agent, which numbers the group's collectives.
    const transfer =
      viaTransport.capabilities.anyThread && !request.collective
        ? this.receiveHere(viaTransport, request, options.timeoutMs)
        : this.agent.transfer({ op: "receive", ...request, into: into.map(toWireTensor), timeoutMs: options.timeoutMs })
    try {
      // Once the microtasks that post the receive have run.
      setImmediate(this.whileReceiving)
      await transfer.done
    } catch (error) {
      quarantine(into, transfer.released())
      throw error
    }
    // Recorded by the driver (metrics and span), which actors report theirs to.
    const stat: TransferStat = {
      objectId: info.objectId,
      transport: via,
      from: info.producer,
      to: this.processId,
      bytes: metas.reduce((n, m) => n + m.nbytes, 0),
      startedAt: performance.timeOrigin + started,
      ms: performance.now() - started,
    }
    const tensors = packing === undefined ? into : unpackTensors(metas, packing, into, options.target)
    return { value: build(tensors), received: true, tensors, stat }
  }

  /** A receive this thread runs itself, with what its transport may write after it failed. */
  private receiveHere(transport: PromiseTransport, request: Omit<ReceiveObject, "writesUntil">, timeoutMs: number): Transfer {
    const use = new BufferUse(transport)
    const done = this.pending.track(receiveLabel(request), request.info.producer, timeoutMs, (signal) =>
      use.run((writesUntil) => receiveObject(transport, { ...request, writesUntil }, signal)),
    )
    return { done, released: () => use.released() }
  }
}

/** The refs `get` was given: one ref, or an array of refs. */
const refList = (refs: unknown): Array<ObjectRef<unknown>> => {
  if (isObjectRef(refs)) return [refs]
  if (Array.isArray(refs)) {
    const stranger = refs.findIndex((r) => !isObjectRef(r))
    if (stranger < 0) return [...refs]
    throw new InvalidArgumentError({ message: `get takes an ObjectRef or an array of them; element ${stranger} is ${describe(refs[stranger])}`, argument: "refs" })
  }
  throw new InvalidArgumentError({ message: `get takes an ObjectRef or an array of them, not ${describe(refs)}`, argument: "refs" })
}

const EMPTY = new Uint8Array(0)

/**
 * Bytes V8's serializer takes at most for an info without transport metadata: a string at most 3 per
 * UTF-16 unit plus its tag and length, a number 10, each key and tag counted generously.
 */
const describedBound = (info: ObjectInfo): number => {
  let bytes = 512 + info.skeleton.byteLength + (info.inline?.byteLength ?? 0) + info.tensors.bytes.byteLength + (info.packed?.byteLength ?? 0)
  bytes += 3 * (info.objectId.length + info.producer.length + info.producerAddress.length + info.transport.length)
  for (const name of info.tensors.names) bytes += 16 + 3 * name.length
  for (const r of info.refs) bytes += 16 + 3 * r.length
  return bytes
}

/**
 * `info` when it fits in the messages that carry it (checked once, here, so that no message with it
 * is ever refused), else MessageTooLargeError. An info whose bound fits needs no measuring (the
 * common case, on every call's path); otherwise it is serialized, its skeleton counted without being
 * copied again.
 */
export const checkDescribed = (info: ObjectInfo): ObjectInfo => {
  if (info.metadata === undefined && describedBound(info) <= MAX_VALUE_BYTES) return info
  const bytes = v8.serialize({ ...info, skeleton: EMPTY }).byteLength + info.skeleton.byteLength
  if (bytes > MAX_VALUE_BYTES) throw tooLarge(`the value of ${info.objectId} (all but its tensors)`, bytes, MAX_VALUE_BYTES)
  return info
}

/** A ref in a value's skeleton that its object does not list among its refs (whose lifetimes its owner tracks). */
const unlistedRef = (id: string, objectId: string): never => {
  throw new ProtocolError({ message: `the value of ${objectId} holds a ref to ${id}, which it does not list among its refs` })
}

/** For agent commands nobody waits for: their failure is reported, never lost. */
const warnUnanswered =
  (what: string) =>
  (error: Error): void =>
    process.emitWarning(`${what}: ${error.message}`, "TensorlaneWarning")
