/**
 * The driver: starts actor processes, submits method calls, owns every object (the directory with
 * reference counts), resolves refs, and manages collective groups. This is the Promise face; the
 * Effect face (`TensorlaneCluster`) wraps the same object.
 */
import { type ChildProcess, spawn as spawnProcess, spawnSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Tracer from "effect/Tracer"
import { type ActorDefinition, type ActorHandle, type CallOptions, isActorDefinition, methodOf } from "./Actor.js"
import {
  ActorDiedError,
  CancelledError,
  ClusterClosedError,
  GroupConflictError,
  InvalidArgumentError,
  MissingGroupError,
  ObjectFreedError,
  ProtocolError,
  TimeoutError,
  UnsupportedOperationError,
} from "./Errors.js"
import type { GetOptions, PutOptions } from "./InActor.js"
import { type TransferStat, recordTransfer } from "./Metrics.js"
import { type ClusterIdentity, ObjectRef, type RefTracker, requireSameCluster, requireUsableRef } from "./ObjectRef.js"
import { TensorStore } from "./TensorStore.js"
import type { TensorTransport } from "./Transport.js"
import { AgentClient } from "./internal/agentClient.js"
import { createClusterDir, removeClusterDir } from "./internal/clusterDir.js"
import { Connection, connect } from "./internal/connection.js"
import { MAX_VALUE_BYTES, tooLarge } from "./internal/frame.js"
import {
  type ActorInspection,
  type AgentReply,
  type AgentRequest,
  type FromActor,
  MAX_AGENT_REQUEST_BYTES,
  type ObjectInfo,
  type ToActor,
  decodeAgentReply,
  decodeFromActor,
} from "./internal/messages.js"
import { GatherRounds, type GatherReply } from "./internal/gatherRounds.js"
import { type Entry, ObjectDirectory } from "./internal/objectDirectory.js"
import { ProcessRuntime, SHUTDOWN_GRACE_MS } from "./internal/processRuntime.js"
import { tensorMeta } from "./internal/tensorMeta.js"
import { loadTransports, normalizeSpecifier, objectStoreName, unknownTransport } from "./internal/transportRegistry.js"
import { encodeValue } from "./internal/valueCodec.js"
import { firstFailure, settledWithin } from "./internal/waits.js"
import { fromWireError, toWireError } from "./internal/wireError.js"
import { checkTimeout, describe, limitTimer } from "./internal/arguments.js"

export interface StartOptions {
  /** Transport modules by specifier (package names, or paths relative to the working directory). */
  readonly transports?: ReadonlyArray<string>
  /** Limit for one transfer (receive, send, fetch); default 120 000 ms. */
  readonly transferTimeoutMs?: number
  /** Extra Node.js flags for actor processes. */
  readonly execArgv?: ReadonlyArray<string>
  /**
   * Where the `tensorlane.transfer` span of every transfer of the cluster goes (the driver makes them
   * from the transfers actors report); default Effect's own tracer. `TensorlaneCluster.layer` passes
   * the tracer of the Effect that builds it.
   */
  readonly tracer?: Tracer.Tracer
}

export interface SpawnOptions {
  /** How many actors to start: an integer from 1 to 256 (default 1). */
  readonly count?: number
  /**
   * Limit for the actors of this call to be ready: process start, module import, transport loading
   * and `init`, all of them together; default 60 000 ms. Past it `spawn` fails with TimeoutError,
   * having ended every process it started.
   */
  readonly startTimeoutMs?: number
  /** Extra environment variables of the actor processes. */
  readonly env?: Readonly<Record<string, string>>
}

export interface GroupOptions {
  readonly backend: string
  readonly name?: string
  readonly timeoutMs?: number
}

export interface CollectiveGroup {
  readonly name: string
  readonly backend: string
  /** Actor ids, by rank. */
  readonly members: ReadonlyArray<string>
  destroy(): Promise<void>
}

export interface ClusterInspection {
  /** Objects the driver still tracks (its directory). */
  readonly objects: ReadonlyArray<string>
  readonly groups: ReadonlyArray<string>
  /** Per process ("driver" and every live actor): primary and received copies, pending transfers, registrations. */
  readonly processes: Readonly<Record<string, ActorInspection>>
  /** Live actors that did not answer within `timeoutMs` (stopped, or stuck in native code). */
  readonly unresponsive: ReadonlyArray<string>
}

type Unref<T> = T extends ObjectRef<infer V> ? V : never

const DEFAULT_TRANSFER_TIMEOUT_MS = 120_000
/**
 * An actor starts in about 0.3 s alone and 16 at once in 5 s on 2 cores; loading native transports
 * and an `init` that loads data take longer. A minute leaves room for all of that on a loaded machine
 * and still reports an `init` that hangs.
 */
const DEFAULT_START_TIMEOUT_MS = 60_000
/**
 * Every actor is a process of about 95 MiB before it holds any tensor: 256 of them take 24 GiB and
 * minutes of CPU to start. One call that asks for more is far likelier a wrong number (a size, an
 * index) than a plan, and would leave the driver starting processes for a long time; several calls
 * start more.
 */
const MAX_SPAWN_COUNT = 256
/** How long a closed control socket waits for the process exit status that explains it. */
const EXIT_STATUS_WAIT_MS = 250

interface ActorRecord {
  readonly id: string
  readonly definition: ActorDefinition
  readonly child: ChildProcess
  readonly control: Connection
  agentAddress: string
  agent: Promise<Connection> | undefined
  alive: boolean
  /** Calls are dispatched to an actor in submission order: each waits for the previous one to be sent. */
  dispatched: Promise<void>
  /** Calls submitted and not yet sent (nor failed). */
  undispatched: number
  readonly inFlight: Map<number, { entry: Entry; method: string; pinned: ReadonlyArray<string> }>
  readonly exited: Promise<void>
}

interface GroupRecord {
  readonly name: string
  readonly backend: string
  readonly members: ReadonlyArray<string>
  readonly gathers: GatherRounds
}

/** Where an actor handle keeps the cluster that made it (a symbol: not one of the actor's method names). */
const handleCluster = Symbol("tensorlane.handleCluster")

const actorMainPath = fileURLToPath(new URL("./actor-main.js", import.meta.url))

/** Flags an actor process needs to import a TypeScript actor module. */
const typeScriptFlags = (moduleUrl: string): Array<string> => {
  if (!/\.[cm]?ts$/.test(moduleUrl)) return []
  if ((process.features as { typescript?: unknown }).typescript) return []
  const [major, minor] = process.versions.node.split(".").map(Number)
  if (major > 22 || (major === 22 && minor >= 6)) return ["--experimental-strip-types", "--no-warnings=ExperimentalWarning"]
  try {
    createRequire(join(process.cwd(), "noop.js")).resolve("tsx")
    return ["--import", "tsx"]
  } catch {
    throw new UnsupportedOperationError({
      message: `actor module ${moduleUrl} is TypeScript, which Node ${process.versions.node} cannot import by itself. Install tsx next to your project (npm i -D tsx), use Node >= 22.18, or point defineActor at compiled JavaScript.`,
    })
  }
}

let launcher: ReadonlyArray<string> | undefined

/**
 * What actor processes start under: Linux's parent-death signal, set by util-linux's setpriv before
 * it runs Node, kills an actor the moment its driver dies, even a stopped one (which runs no code, so
 * its own lifeline cannot end it). Where setpriv is missing only the lifeline ends actors.
 */
const deathSignalLauncher = (): ReadonlyArray<string> => {
  if (launcher === undefined) {
    const prefix = ["setpriv", "--pdeathsig", "KILL", "--"]
    const probe = process.platform === "linux" ? spawnSync(prefix[0], [...prefix.slice(1), process.execPath, "--version"], { stdio: "ignore" }) : undefined
    launcher = probe?.status === 0 ? prefix : []
  }
  return launcher
}

const checkCount = (count: unknown): number => {
  if (count === undefined) return 1
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > MAX_SPAWN_COUNT) {
    throw new InvalidArgumentError({
      message: `count must be an integer from 1 to ${MAX_SPAWN_COUNT}, not ${describe(count)}; start more actors with several spawn calls`,
      argument: "count",
    })
  }
  return count
}

export class Cluster implements AsyncDisposable {
  private readonly directory: ObjectDirectory
  private readonly actors = new Map<string, ActorRecord>()
  /** Actors of spawn calls that have not returned: shutdown ends them too. */
  private readonly starting = new Set<ActorRecord>()
  private readonly groups = new Map<string, GroupRecord>()
  private readonly inspections = new Map<number, { actor: string; resolve: (inspection: ActorInspection | undefined) => void }>()
  private readonly prefetches = new Map<number, { actor: string; resolve: () => void; reject: (e: Error) => void }>()
  private readonly agentRequests = new Map<
    number,
    {
      readonly actor: string
      readonly resolve: (reply: AgentReply) => void
      readonly reject: (e: Error) => void
      readonly onGather?: (reply: Extract<AgentReply, { _tag: "Gather" }>) => void
    }
  >()
  private nextActor = new Map<string, number>()
  private nextCall = 1
  private nextReq = 1
  private nextGroup = 1
  /** This cluster's random id, carried by its refs and handles (ids like `driver.1` repeat from cluster to cluster). */
  private readonly identity: { readonly id: string; closed: boolean } = { id: randomUUID(), closed: false }
  readonly runtime: ProcessRuntime
  private readonly tracker: RefTracker

  private constructor(
    private readonly dir: string,
    private readonly options: Required<Pick<StartOptions, "transferTimeoutMs" | "tracer">> & { transports: ReadonlyArray<string>; execArgv: ReadonlyArray<string> },
    agent: AgentClient,
    transports: ReadonlyMap<string, TensorTransport>,
  ) {
    this.directory = new ObjectDirectory((entry) => this.onFree(entry))
    this.tracker = { acquire: (id) => this.directory.acquire(id), release: (id) => this.directory.release(id), cluster: this.identity }
    this.runtime = new ProcessRuntime("driver", this.identity, agent, new TensorStore(), transports, (id) => new ObjectRef(id, this.tracker))
  }

  /** @internal use `start()`. */
  static async create(options: StartOptions = {}): Promise<Cluster> {
    const transferTimeoutMs = checkTimeout(options.transferTimeoutMs, "transferTimeoutMs") ?? DEFAULT_TRANSFER_TIMEOUT_MS
    const specifiers = (options.transports ?? []).map(normalizeSpecifier)
    const transports = await loadTransports(specifiers, {
      fetchFrom: () => Promise.reject(new UnsupportedOperationError({ message: "fetches run in the transfer agent" })),
    })
    const dir = createClusterDir()
    const agent = await AgentClient.start(
      { processId: "driver", address: join(dir, "driver.sock"), transports: specifiers, parentPid: undefined },
      () => undefined,
    ).catch((error) => {
      removeClusterDir(dir)
      throw error
    })
    return new Cluster(
      dir,
      {
        transports: specifiers,
        transferTimeoutMs,
        execArgv: options.execArgv ?? [],
        tracer: options.tracer ?? Tracer.nativeTracer,
      },
      agent,
      transports,
    )
  }

  /** Names of the registered transports. */
  get transportNames(): ReadonlyArray<string> {
    return [...this.runtime.transports.keys()]
  }

  /** The id its refs and handles carry. */
  get id(): string {
    return this.identity.id
  }

  private ensureOpen(): void {
    if (this.identity.closed) throw new ClusterClosedError({ message: "the cluster is shut down" })
  }

  private transport(name: string): TensorTransport {
    return this.runtime.transport(name)
  }

  // ---- Actors

  /** Starts `count` actor processes of a definition (always an array). */
  async spawn<D extends ActorDefinition>(definition: D, options: SpawnOptions = {}): Promise<Array<ActorHandle<D>>> {
    this.ensureOpen()
    if (!isActorDefinition(definition)) throw new InvalidArgumentError({ message: `spawn takes an actor definition (defineActor), not ${describe(definition)}`, argument: "definition" })
    const count = checkCount(options.count)
    const startTimeoutMs = checkTimeout(options.startTimeoutMs, "startTimeoutMs") ?? DEFAULT_START_TIMEOUT_MS
    // Unknown transport names fail here, before any process starts.
    for (const name of Object.keys(definition.spec.methods as object)) {
      const transport = methodOf(definition, name)?.options.tensorTransport
      if (transport !== undefined) this.transport(transport)
    }
    const flags = [...this.options.execArgv, ...typeScriptFlags(definition.moduleUrl)]
    const starts = Array.from({ length: count }, (_, index) => this.startActor(definition, index, flags, options.env ?? {}))
    const records = starts.map((s) => s.record)
    const ready = new Set<ActorRecord>()
    for (const s of starts) {
      this.starting.add(s.record)
      s.ready.then(() => ready.add(s.record)).catch(() => undefined)
    }
    const late = () => records.filter((r) => !ready.has(r)).map((r) => r.id)
    const failure =
      (await firstFailure(
        starts.map((s) => s.ready),
        startTimeoutMs,
        () =>
          new TimeoutError({
            message: `${late().join(", ")} did not start within ${startTimeoutMs} ms (spawn's startTimeoutMs): an init that never resolves, or a machine too loaded to start ${count} actor${count === 1 ? "" : "s"} in time`,
            timeoutMs: startTimeoutMs,
          }),
      )) ?? (this.identity.closed ? closedWhileStarting(records) : undefined)
    for (const r of records) this.starting.delete(r)
    if (failure !== undefined) {
      // None is handed out: every process of this call is gone before the failure is reported
      // (unless the kernel holds one past the grace).
      for (const r of records) r.child.kill("SIGKILL")
      await settledWithin(
        records.map((r) => r.exited),
        SHUTDOWN_GRACE_MS,
      )
      throw failure
    }
    for (const r of records) this.actors.set(r.id, r)
    return records.map((r) => this.handle<D>(r))
  }

  private startActor(
    definition: ActorDefinition,
    index: number,
    flags: ReadonlyArray<string>,
    env: Readonly<Record<string, string>>,
  ): { readonly record: ActorRecord; readonly ready: Promise<void> } {
    const n = this.nextActor.get(definition.name) ?? 0
    this.nextActor.set(definition.name, n + 1)
    const id = `${definition.name}-${n}`
    // --expose-gc lets the host memory cache trade a cheap collection for page faults (internal/hostMemoryCache.ts).
    const [command, ...args] = [...deathSignalLauncher(), process.execPath, ...flags, "--expose-gc", actorMainPath]
    const child = spawnProcess(command!, args, {
      stdio: ["ignore", "inherit", "inherit", "pipe"],
      env: { ...process.env, ...env },
    })
    let record!: ActorRecord
    const whenReady = new Promise<void>((resolve, reject) => {
      let ready = false
      const exitedWhileStarting = (how: string) =>
        reject(this.identity.closed ? closedWhileStarting([record]) : new ActorDiedError({ message: `actor ${id} exited while starting${how}`, actor: id }))
      const exited = new Promise<void>((done) => child.once("exit", () => done()))
      const control = new Connection(child.stdio[3] as import("node:net").Socket, {
        // An actor's messages to the driver never carry a body.
        maxBodyBytes: 0,
        onFrame: (frame) => {
          let message: FromActor
          try {
            message = decodeFromActor(frame.header)
          } catch (error) {
            control.close(error as Error)
            return
          }
          if (!ready) {
            if (message._tag === "Ready") {
              ready = true
              record.agentAddress = message.agentAddress
              resolve()
            } else if (message._tag === "InitFailed") {
              reject(fromWireError(message.error, { actor: id, method: "init" }))
              child.kill("SIGKILL")
            }
            return
          }
          this.onActorMessage(record, message)
        },
        onClose: (error) => {
          if (!ready) exitedWhileStarting(error ? `: ${error.message}` : "")
          // A closed control socket usually means the process is gone: its exit status says why.
          else setTimeout(() => this.onActorDeath(record, error ?? new Error("its control connection closed")), EXIT_STATUS_WAIT_MS).unref()
        },
      })
      record = {
        id,
        definition,
        child,
        control,
        agentAddress: "",
        agent: undefined,
        alive: true,
        dispatched: Promise.resolve(),
        undispatched: 0,
        inFlight: new Map(),
        exited,
      }
      child.once("exit", (code, signal) => {
        if (!ready) exitedWhileStarting(` (code ${code}, signal ${signal})`)
        this.onActorDeath(record, undefined, code, signal)
      })
      control.send({
        _tag: "Init",
        actorId: id,
        index,
        moduleUrl: definition.moduleUrl,
        exportName: definition.name,
        transports: this.options.transports,
        clusterDir: this.dir,
        clusterId: this.identity.id,
        maxConcurrency: definition.spec.maxConcurrency ?? 1,
        transferTimeoutMs: this.options.transferTimeoutMs,
      } satisfies ToActor)
    })
    return { record, ready: whenReady }
  }

  private handle<D extends ActorDefinition>(record: ActorRecord): ActorHandle<D> {
    const methods: Record<string, unknown> = {}
    for (const name of Object.keys(record.definition.spec.methods as object)) {
      const call = (options: CallOptions) => (...args: Array<unknown>) => this.submit(record, name, args, options)
      methods[name] = Object.assign(call({}), { options: call })
    }
    const handle = { ...methods, actorId: record.id, definition: record.definition }
    Object.defineProperty(handle, handleCluster, { value: this.identity })
    return handle as ActorHandle<D>
  }

  /** The record of an actor handle this cluster made (WrongClusterError for another's, ClusterClosedError once shut down). */
  private actorOf(handle: { actorId: string }): ActorRecord {
    const cluster = (handle as { [handleCluster]?: ClusterIdentity } | null)?.[handleCluster]
    if (cluster === undefined) {
      throw new InvalidArgumentError({ message: `${describe(handle)} is not an actor handle (cluster.spawn returns them)`, argument: "actor" })
    }
    requireSameCluster(cluster, this.identity, `actor ${handle.actorId}`)
    return this.actors.get(handle.actorId)!
  }

  // ---- Calls

  private submit(record: ActorRecord, method: string, args: ReadonlyArray<unknown>, options: CallOptions): ObjectRef<unknown> {
    this.ensureOpen()
    const transport = options.tensorTransport ?? methodOf(record.definition, method)?.options.tensorTransport ?? objectStoreName
    this.transport(transport)
    const encoded = encodeValue([...args], "argument")
    for (const ref of encoded.refs) requireUsableRef(ref, this.identity)
    if (encoded.skeleton.byteLength > MAX_VALUE_BYTES) {
      throw tooLarge(`the arguments of ${record.id}.${method} (all but their tensors)`, encoded.skeleton.byteLength, MAX_VALUE_BYTES)
    }
    const argEntries = [...new Set(encoded.refs.map((r) => r.id))].map((id) => this.directory.require(id))
    const routes = new Map<string, { group: string; rank: number; toRank: number }>()
    for (const entry of argEntries) {
      // The producer has the very tensors; a receiver of a broadcast keeps its copy: no transfer either way.
      if (entry.producer === record.id || entry.copies.has(record.id)) continue
      const capabilities = this.transport(entry.transport).capabilities
      if (capabilities.oneSided) continue
      const group = this.groupOf(entry.transport, entry.producer, record.id)
      if (group === undefined) {
        throw new MissingGroupError({
          message: `${record.id} cannot receive ${entry.id} over "${entry.transport}" from ${entry.producer}: they share no ${entry.transport} group. Create one first: cluster.createCollectiveGroup([producer, consumer], { backend: "${entry.transport}" })`,
          backend: entry.transport,
        })
      }
      routes.set(entry.id, { group: group.name, rank: group.members.indexOf(entry.producer), toRank: group.members.indexOf(record.id) })
    }
    const entry = this.directory.create(this.runtime.newObjectId(), record.id, transport)
    const ref = new ObjectRef(entry.id, this.tracker)
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
      : argEntries.filter((e) => e.state === "pending" && routes.has(e.id) && this.transport(e.transport).capabilities.matchesByObject === true)
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
      if (!record.alive) throw new ActorDiedError({ message: `actor ${record.id} is dead`, actor: record.id })
      if (failed !== undefined) throw failed.error!
      for (const e of ready) this.noteTaker(e, record.id)
      const refs: Array<ObjectInfo> = ready.map((e) => {
        const route = routes.get(e.id)
        return route === undefined ? e.info! : { ...e.info!, route: { group: route.group, rank: route.rank } }
      })
      record.inFlight.set(callId, { entry, method, pinned })
      record.control.send(
        {
          _tag: "Call",
          callId,
          method,
          returnId: entry.id,
          ...(options.tensorTransport !== undefined ? { transport: options.tensorTransport } : {}),
          args: encoded.skeleton,
          argTensors: encoded.tensors.map(tensorMeta),
          refs,
        } satisfies ToActor,
        encoded.tensors.map((t) => t.contiguousBytes()),
      )
      for (const e of ready) {
        const route = routes.get(e.id)
        if (route === undefined) continue
        const sentEarly = early.some((x) => x.id === e.id)
        // A value without tensors travels whole in its info: there is nothing to send, and the
        // producer never registers it, so a send asked for early would wait for it forever.
        if (e.info!.tensors.length === 0) {
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

  /**
   * Warns, once per object, when calls of its producer and of another actor both take it (Ray's RDT
   * warns of the same): the producer's call gets the very tensors, the other a copy made whenever its
   * transfer runs, so an in-place change by the producer's call may or may not reach it.
   */
  private noteTaker(entry: Entry, actor: string): void {
    const shared = () => entry.takers.has(entry.producer) && entry.takers.size >= 2
    const wasShared = shared()
    entry.takers.add(actor)
    if (wasShared || !shared() || entry.info!.tensors.length === 0) return
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
   * The producer's half of a two-sided transfer, run by its agent even while its main thread is busy;
   * `whenRegistered`: the object is still being made, and the agent waits for it.
   */
  private startSend(entry: Entry, group: string, to: string, toRank: number, whenRegistered: boolean): void {
    const producer = this.actors.get(entry.producer)
    if (producer === undefined) return
    this.agentRequest(producer, {
      _tag: "Send",
      reqId: 0,
      objectId: entry.id,
      transport: entry.transport,
      group,
      to,
      toRank,
      timeoutMs: this.options.transferTimeoutMs,
      ...(whenRegistered ? { whenRegistered } : {}),
    }).catch(() => {
      // The receiver fails by itself: its own timeout, or PeerDied should the producer die (onActorDeath).
    })
  }

  /**
   * A send asked for early whose consumer's call will not be sent. While its object is not made the
   * send only waits, and is cancelled; once the object exists the send may be posted, and a posted
   * two-sided send cannot be taken back: the consumer takes the object in as a copy instead (kept
   * until the object is freed, and used by its later calls), so that nothing stays posted.
   */
  private endEarlySend(entry: Entry, consumer: ActorRecord, route: { group: string; rank: number }): void {
    if (entry.state !== "ready" || entry.info!.tensors.length === 0 || !consumer.alive) {
      this.cancelSend(entry, consumer.id)
      return
    }
    this.directory.acquire(entry.id)
    this.prefetch(consumer, entry, { ...entry.info!, route: { group: route.group, rank: route.rank } }, false)
      .catch(() => {
        // Its own failure (the consumer died, the group broke) ends the send as well.
      })
      .finally(() => this.directory.release(entry.id))
  }

  /** Ends a send asked for early that will not happen: its consumer's call was never sent, or its object holds no tensor. */
  private cancelSend(entry: Entry, to: string): void {
    const producer = this.actors.get(entry.producer)
    if (!producer?.alive) return
    this.agentRequest(producer, { _tag: "CancelSend", reqId: 0, objectId: entry.id, transport: entry.transport, to }, false).catch(() => undefined)
  }

  private onActorMessage(record: ActorRecord, message: FromActor): void {
    switch (message._tag) {
      case "Result": {
        const call = record.inFlight.get(message.callId)
        if (call === undefined) return
        record.inFlight.delete(message.callId)
        for (const stat of message.transfers) this.recordTransfer(stat)
        if (call.entry.state !== "pending") {
          // Cancelled while it ran: whatever it made is nobody's.
          if (message.info !== undefined && message.info.tensors.length > 0) record.control.send({ _tag: "Free", objectIds: [message.info.objectId] } satisfies ToActor)
        } else if (message.info !== undefined) this.directory.ready(call.entry, message.info)
        else this.directory.fail(call.entry, fromWireError(message.error!, { actor: record.id, method: call.method }))
        this.unpin(call.pinned)
        return
      }
      case "Put": {
        let error: Error | undefined
        if (message.info.producer !== record.id || this.directory.get(message.info.objectId) !== undefined) {
          error = new ProtocolError({ message: `${record.id} put an object under an id it does not own: ${message.info.objectId}` })
        } else {
          const entry = this.directory.create(message.info.objectId, record.id, message.info.transport)
          this.directory.acquire(entry.id, record.id)
          this.directory.ready(entry, message.info)
        }
        record.control.send({ _tag: "PutAck", reqId: message.reqId, ...(error ? { error: toWireError(error) } : {}) } satisfies ToActor)
        return
      }
      case "Resolve": {
        const reply = (info: ObjectInfo | undefined, error: Error | undefined) =>
          record.control.send({
            _tag: "Resolved",
            reqId: message.reqId,
            ...(info ? { info } : {}),
            ...(error ? { error: toWireError(error) } : {}),
          } satisfies ToActor)
        const entry = this.directory.get(message.objectId)
        if (entry === undefined) {
          reply(undefined, new ObjectFreedError({ message: `object ${message.objectId} was released`, objectId: message.objectId }))
          return
        }
        this.directory.acquire(entry.id)
        this.directory
          .wait(entry, message.timeoutMs ?? Infinity)
          .then(
            (e) => (e.state === "ready" ? reply(e.info, undefined) : reply(undefined, e.error)),
            (error) => reply(undefined, error),
          )
          .finally(() => this.directory.release(entry.id))
        return
      }
      case "AddRefs":
        for (const id of message.objectIds) this.directory.acquire(id, record.id)
        return
      case "DropRefs":
        for (const id of message.objectIds) this.directory.release(id, record.id)
        return
      case "Prefetched": {
        const waiter = this.prefetches.get(message.reqId)
        this.prefetches.delete(message.reqId)
        for (const stat of message.transfers) this.recordTransfer(stat)
        if (message.error !== undefined) waiter?.reject(fromWireError(message.error, { actor: record.id, method: "broadcast" }))
        else waiter?.resolve()
        return
      }
      case "AllGather": {
        const send = (r: GatherReply) =>
          record.control.send({
            _tag: "AllGathered",
            reqId: message.reqId,
            ...(r.blobs ? { blobs: r.blobs as Array<Uint8Array> } : {}),
            ...(r.error ? { error: toWireError(r.error) } : {}),
          } satisfies ToActor)
        const reply = (r: GatherReply) => {
          try {
            send(r)
          } catch (error) {
            // Every member's blob together is more than a message carries (MessageTooLargeError): the round fails.
            send({ error: error as Error })
          }
        }
        const group = this.groups.get(message.group)
        const rank = group?.members.indexOf(record.id) ?? -1
        if (group === undefined || rank < 0) {
          reply({ error: new MissingGroupError({ message: `${record.id} is in no group named "${message.group}"`, backend: group?.backend ?? "" }) })
          return
        }
        group.gathers.contribute(rank, message.blob, message.timeoutMs, reply)
        return
      }
      case "Inspection": {
        const waiter = this.inspections.get(message.reqId)
        this.inspections.delete(message.reqId)
        waiter?.resolve(message.inspection)
        return
      }
      case "Ready":
      case "InitFailed":
        record.control.close(new ProtocolError({ message: `${message._tag} from ${record.id} after start` }))
        return
    }
  }

  private onActorDeath(record: ActorRecord, error: Error | undefined, code?: number | null, signal?: NodeJS.Signals | null): void {
    if (!record.alive) return
    record.alive = false
    const how = error ? `: ${error.message}` : code !== undefined ? ` (exit code ${code}, signal ${signal})` : ""
    const died = new ActorDiedError({ message: `actor ${record.id} died${how}`, actor: record.id })
    if (!this.identity.closed) record.child.kill("SIGKILL")
    for (const call of record.inFlight.values()) {
      this.directory.fail(call.entry, died)
      this.unpin(call.pinned)
    }
    record.inFlight.clear()
    for (const entry of this.directory.values()) {
      if (entry.producer !== record.id) continue
      if (entry.state === "pending" || entry.info?.inline === undefined) this.directory.fail(entry, died)
    }
    this.directory.dropBorrower(record.id)
    for (const request of takeWaitersOf(this.agentRequests, record.id)) request.reject(died)
    for (const waiter of takeWaitersOf(this.inspections, record.id)) waiter.resolve(undefined)
    for (const waiter of takeWaitersOf(this.prefetches, record.id)) waiter.reject(died)
    for (const group of this.groups.values()) if (group.members.includes(record.id)) group.gathers.breakAll(died)
    this.runtime.peerDied(record.id)
    for (const other of this.actors.values()) {
      if (!other.alive) continue
      other.control.send({ _tag: "PeerDied", peer: record.id } satisfies ToActor)
      if (other.agent !== undefined) this.agentRequest(other, { _tag: "PeerDied", reqId: 0, peer: record.id }, false).catch(() => undefined)
    }
  }

  private onFree(entry: Entry): void {
    if (entry.info === undefined || entry.info.tensors.length === 0) return
    for (const id of entry.copies) {
      const holder = this.actors.get(id)
      if (holder?.alive) holder.control.send({ _tag: "Free", objectIds: [entry.id] } satisfies ToActor)
    }
    if (entry.producer === "driver") {
      this.runtime.free([entry.id]).catch((error) => console.error("tensorlane: free failed:", error))
      return
    }
    const producer = this.actors.get(entry.producer)
    if (producer?.alive) producer.control.send({ _tag: "Free", objectIds: [entry.id] } satisfies ToActor)
  }

  // ---- Ending actors and calls

  /**
   * Ends an actor at once (SIGKILL, Ray's `ray.kill`), however busy or stuck it is: its pending and
   * later calls, and the objects it produced, fail with ActorDiedError as if it had died (small
   * object-store values, whose bytes the driver holds, stay readable). The other actors go on.
   * Resolves once the process is gone.
   */
  async kill(actor: { actorId: string }): Promise<void> {
    this.ensureOpen()
    const record = this.actorOf(actor)
    this.onActorDeath(record, new Error("cluster.kill ended it"))
    await record.exited
  }

  /**
   * Cancels the call that makes `ref` (Ray's `ray.cancel`): its ref, and the calls that take it, fail
   * with CancelledError at once. A call not yet running never runs (one receiving its arguments
   * takes them in first: their producers are sending); a running call sees its `cancellationSignal()`
   * abort, and what it returns anyway is freed. Only that call is cancelled: not the calls that make
   * its arguments, nor its actor's other calls. A finished call (or a put) is left as it is.
   */
  cancel(ref: ObjectRef<unknown>): void {
    this.ensureOpen()
    requireUsableRef(ref, this.identity)
    const entry = this.directory.get(ref.id)
    if (entry?.state !== "pending") return
    const record = this.actors.get(entry.producer)!
    const sent = [...record.inFlight].find(([, call]) => call.entry === entry)
    this.directory.fail(entry, new CancelledError({ message: `the call of ${record.id} that makes ${ref} was cancelled`, objectId: ref.id }))
    if (sent !== undefined) record.control.send({ _tag: "Cancel", callId: sent[0] } satisfies ToActor)
  }

  // ---- Driver-side get and put

  /** Resolves refs to their values. Waits without limit unless `timeoutMs` is given. */
  async get<R extends ObjectRef<unknown>>(ref: R, options?: GetOptions): Promise<Unref<R>>
  async get<R extends ReadonlyArray<ObjectRef<unknown>>>(refs: R, options?: GetOptions): Promise<{ [K in keyof R]: Unref<R[K]> }>
  async get(refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>, options: GetOptions = {}): Promise<unknown> {
    this.ensureOpen()
    return this.runtime.get(refs, options, this.options.transferTimeoutMs, async (ref, remainingMs) => {
      const pending = this.directory.require(ref.id)
      // The object stays alive while this get needs it, even if the caller drops its ref meanwhile.
      this.directory.acquire(pending.id)
      const done = () => this.directory.release(pending.id)
      try {
        const entry = await this.directory.wait(pending, remainingMs).catch((error) => {
          throw error instanceof TimeoutError
            ? new TimeoutError({ message: `get of ${ref} did not complete within ${options.timeoutMs} ms`, timeoutMs: options.timeoutMs! })
            : error
        })
        if (entry.state === "failed") throw entry.error!
        return { info: entry.info!, done }
      } catch (error) {
        done()
        throw error
      }
    }, this.recordTransfer)
  }

  private readonly recordTransfer = (stat: TransferStat): void => recordTransfer(stat, this.options.tracer)

  /** Stores a value in the driver for actors to read (object-store or a one-sided transport). */
  async put<T>(value: T, options: PutOptions = {}): Promise<ObjectRef<T>> {
    this.ensureOpen()
    const transport = options.tensorTransport ?? objectStoreName
    if (!this.transport(transport).capabilities.oneSided) {
      throw new UnsupportedOperationError({
        message: `put with the two-sided transport "${transport}" is not possible: a two-sided transfer needs both ends in a collective group, and the driver is in none. Use a one-sided transport (or object-store), or return the value from an actor method.`,
      })
    }
    const id = this.runtime.newObjectId()
    const info = await this.runtime.produce(id, value, transport, "put")
    const entry = this.directory.create(id, "driver", transport)
    const ref = new ObjectRef<T>(id, this.tracker)
    this.directory.ready(entry, info)
    return ref
  }

  /**
   * Places a received copy of an object in each receiver, in one operation: a collective broadcast
   * when the object's transport has one and the receivers are the rest of its group, else a transfer
   * to each. The copies stay until the object is freed, and calls on those receivers that take the
   * ref use them without another transfer (the weight-sync case).
   */
  async broadcast(ref: ObjectRef<unknown>, receivers: ReadonlyArray<{ actorId: string }>, options: { timeoutMs?: number } = {}): Promise<void> {
    this.ensureOpen()
    requireUsableRef(ref, this.identity)
    const limitMs = checkTimeout(options.timeoutMs, "timeoutMs")
    const receiving = receivers.map((r) => this.actorOf(r))
    const entry = this.directory.require(ref.id)
    this.directory.acquire(entry.id)
    try {
      const ready = await this.directory.wait(entry, limitMs ?? Infinity)
      if (ready.state === "failed") throw ready.error!
      const info = ready.info!
      const records = receiving.filter((r) => r.id !== entry.producer && !entry.copies.has(r.id))
      const transport = this.transport(entry.transport)
      const timeoutMs = limitMs ?? this.options.transferTimeoutMs
      if (transport.capabilities.oneSided) {
        await settleAll(records.map((r) => this.prefetch(r, entry, info, false)))
        return
      }
      const group = this.groupOf(entry.transport, entry.producer, ...records.map((r) => r.id))
      if (group === undefined) {
        throw new MissingGroupError({
          message: `no ${entry.transport} group holds ${entry.producer} and every receiver; create one with cluster.createCollectiveGroup`,
          backend: entry.transport,
        })
      }
      const root = group.members.indexOf(entry.producer)
      const routed = { ...info, route: { group: group.name, rank: root } }
      const whole = transport.broadcast !== undefined && group.members.length === records.length + 1
      const producer = this.actors.get(entry.producer)!
      const sends = whole
        ? [this.agentRequest(producer, { _tag: "Broadcast", reqId: 0, objectId: entry.id, group: group.name, root, timeoutMs })]
        : records.map((r) =>
            this.agentRequest(producer, {
              _tag: "Send",
              reqId: 0,
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
      this.directory.release(entry.id)
    }
  }

  private prefetch(record: ActorRecord, entry: Entry, info: ObjectInfo, collective: boolean): Promise<void> {
    if (!record.alive) return Promise.reject(new ActorDiedError({ message: `actor ${record.id} is dead`, actor: record.id }))
    const reqId = this.nextReq++
    return new Promise((resolve, reject) => {
      const kept = () => {
        // A copy counts once it is there; one that outlived its object is freed at once.
        if (this.directory.get(entry.id) === entry) entry.copies.add(record.id)
        else record.control.send({ _tag: "Free", objectIds: [entry.id] } satisfies ToActor)
        resolve()
      }
      this.prefetches.set(reqId, { actor: record.id, resolve: kept, reject })
      record.control.send({ _tag: "Prefetch", reqId, info, collective } satisfies ToActor)
    })
  }

  // ---- Collective groups

  /** A group of `backend` that holds every one of `members`. */
  private groupOf(backend: string, ...members: ReadonlyArray<string>): GroupRecord | undefined {
    for (const group of this.groups.values()) {
      if (group.backend === backend && members.every((id) => group.members.includes(id))) return group
    }
    return undefined
  }

  listGroups(): ReadonlyArray<{ name: string; backend: string; members: ReadonlyArray<string> }> {
    return [...this.groups.values()].map(({ name, backend, members }) => ({ name, backend, members }))
  }

  async createCollectiveGroup(actors: ReadonlyArray<{ actorId: string }>, options: GroupOptions): Promise<CollectiveGroup> {
    this.ensureOpen()
    if (!Array.isArray(actors)) throw new InvalidArgumentError({ message: `createCollectiveGroup takes an array of actor handles, not ${describe(actors)}`, argument: "actors" })
    if (typeof options?.backend !== "string") {
      throw new InvalidArgumentError({ message: `createCollectiveGroup needs { backend }, the name of a transport, not ${describe(options?.backend)}`, argument: "backend" })
    }
    const timeoutMs = checkTimeout(options.timeoutMs, "timeoutMs") ?? this.options.transferTimeoutMs
    const backend = options.backend.toLowerCase()
    const transport = this.runtime.transports.get(backend)
    if (transport === undefined) throw unknownTransport(backend, this.runtime.transports.keys())
    if (transport.createGroup === undefined) {
      throw new UnsupportedOperationError({ message: `transport "${backend}" has no collective groups` })
    }
    const records = actors.map((a) => this.actorOf(a))
    const members = records.map((r) => r.id)
    const twice = members.find((m, i) => members.indexOf(m) !== i)
    if (twice !== undefined) throw new GroupConflictError({ message: `${twice} is listed twice: list each actor of a group once`, backend })
    const name = options.name ?? `${backend}-${this.nextGroup++}`
    if (this.groups.has(name)) {
      throw new GroupConflictError({ message: `a group named "${name}" exists: choose another name, or destroy that group first`, backend })
    }
    for (let i = 0; i < members.length; i++) {
      for (let j = i + 1; j < members.length; j++) {
        const existing = this.groupOf(backend, members[i], members[j])
        if (existing !== undefined) {
          throw new GroupConflictError({
            message: `${members[i]} and ${members[j]} already share the ${backend} group "${existing.name}"; a pair of actors shares at most one group per backend (destroy it first)`,
            backend,
          })
        }
      }
    }
    const record: GroupRecord = { name, backend, members, gathers: new GatherRounds(name, members.length) }
    this.groups.set(name, record)
    const blobs: Array<Uint8Array | undefined> = new Array(members.length)
    let gathered = 0
    // The gathered blobs may be more than an agent accepts (MessageTooLargeError): that ends the creation.
    let gatherFailed!: (error: unknown) => void
    const gatherFailure = new Promise<never>((_, reject) => (gatherFailed = reject))
    const onGather = (reply: Extract<AgentReply, { _tag: "Gather" }>) => {
      if (reply.group !== name || reply.rank < 0 || reply.rank >= members.length || blobs[reply.rank] !== undefined) return
      blobs[reply.rank] = reply.blob
      if (++gathered < members.length) return
      for (const r of records) {
        this.agentRequest(r, { _tag: "Gathered", reqId: 0, group: name, blobs: blobs as Array<Uint8Array> }, false).catch(gatherFailed)
      }
    }
    const requests = records.map((r, rank) =>
      this.agentRequest(
        r,
        { _tag: "GroupCreate", reqId: 0, setup: { name, backend, rank, worldSize: members.length, members, timeoutMs } },
        true,
        onGather,
      ),
    )
    // The first failure ends the creation: the other members would wait in the rendezvous for ever.
    const failure = await firstFailure(
      [Promise.race([Promise.all(requests), gatherFailure])],
      timeoutMs,
      () => new TimeoutError({ message: `creating the ${backend} group "${name}" took over ${timeoutMs} ms`, timeoutMs }),
    )
    if (failure !== undefined) {
      // Members that are stuck (stopped, or blocked in a native connect) must not hold up the failure.
      void this.destroyGroup(record)
      throw failure
    }
    return { name, backend, members, destroy: () => this.destroyGroup(record) }
  }

  private async destroyGroup(record: GroupRecord): Promise<void> {
    if (this.groups.get(record.name) !== record) return
    this.groups.delete(record.name)
    record.gathers.breakAll(new MissingGroupError({ message: `the ${record.backend} group "${record.name}" was destroyed`, backend: record.backend }))
    await Promise.allSettled(
      record.members
        .map((id) => this.actors.get(id))
        .filter((r): r is ActorRecord => r !== undefined && r.alive)
        .map((r) => this.agentRequest(r, { _tag: "GroupDestroy", reqId: 0, name: record.name, backend: record.backend })),
    )
  }

  private agentConnection(record: ActorRecord): Promise<Connection> {
    if (record.agent === undefined) {
      record.agent = connect(record.agentAddress, {
        peerMaxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
        onFrame: (frame) => {
          let reply: AgentReply
          try {
            reply = decodeAgentReply(frame.header)
          } catch {
            return
          }
          const request = this.agentRequests.get(reply.reqId)
          if (request === undefined) return
          if (reply._tag === "Gather") {
            request.onGather?.(reply)
            return
          }
          this.agentRequests.delete(reply.reqId)
          if (reply._tag === "Failed") request.reject(fromWireError(reply.error, { actor: record.id, method: "agent" }))
          else request.resolve(reply)
        },
        onClose: () => {
          record.agent = undefined
        },
      })
    }
    return record.agent
  }

  private async agentRequest(
    record: ActorRecord,
    request: AgentRequest,
    awaitReply = true,
    onGather?: (reply: Extract<AgentReply, { _tag: "Gather" }>) => void,
  ): Promise<AgentReply | undefined> {
    const connection = await this.agentConnection(record)
    const reqId = this.nextReq++
    const message = { ...request, reqId }
    if (!awaitReply) {
      connection.send(message)
      return undefined
    }
    return new Promise((resolve, reject) => {
      // First: a request over what the agent accepts rejects with MessageTooLargeError and leaves no waiter behind.
      connection.send(message)
      this.agentRequests.set(reqId, { actor: record.id, resolve, reject, ...(onGather ? { onGather } : {}) })
    })
  }

  // ---- Introspection and shutdown

  /** What every process still holds: empty lists mean nothing leaked. An actor's main thread answers, so a busy one delays it. */
  async inspect(options: { timeoutMs?: number } = {}): Promise<ClusterInspection> {
    this.ensureOpen()
    const timeoutMs = checkTimeout(options.timeoutMs, "timeoutMs") ?? 30_000
    const processes: Record<string, ActorInspection> = {}
    const unresponsive: Array<string> = []
    processes.driver = await this.runtime.inspect()
    await Promise.all(
      [...this.actors.values()]
        .filter((r) => r.alive)
        .map(
          (r) =>
            new Promise<void>((resolve) => {
              const reqId = this.nextReq++
              const timer = limitTimer(timeoutMs, () => {
                if (!this.inspections.delete(reqId)) return
                unresponsive.push(r.id)
                resolve()
              })
              this.inspections.set(reqId, {
                actor: r.id,
                resolve: (inspection) => {
                  clearTimeout(timer)
                  if (inspection !== undefined) processes[r.id] = inspection
                  resolve()
                },
              })
              r.control.send({ _tag: "Inspect", reqId } satisfies ToActor)
            }),
        ),
    )
    return { objects: [...this.directory.values()].map((e) => e.id), groups: [...this.groups.keys()], processes, unresponsive }
  }

  /**
   * Stops every actor process, those still starting too, and the driver's agent; each actor first
   * finishes the releases it has under way. Idempotent.
   */
  async shutdown(): Promise<void> {
    if (this.identity.closed) return
    this.identity.closed = true
    const records = [...this.actors.values()]
    for (const r of records) if (r.alive) r.control.send({ _tag: "Shutdown" } satisfies ToActor)
    // An actor still starting holds nothing yet: it ends at once.
    const starting = [...this.starting]
    for (const r of starting) r.child.kill("SIGKILL")
    await Promise.all(
      [...records, ...starting].map(async (r) => {
        await settledWithin([r.exited], SHUTDOWN_GRACE_MS)
        if (r.child.exitCode !== null || r.child.signalCode !== null) return
        r.child.kill("SIGKILL")
        await settledWithin([r.exited], SHUTDOWN_GRACE_MS)
      }),
    )
    await this.runtime.close()
    removeClusterDir(this.dir)
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown()
  }
}

const closedWhileStarting = (records: ReadonlyArray<{ readonly id: string }>): ClusterClosedError =>
  new ClusterClosedError({ message: `the cluster was shut down before ${records.map((r) => r.id).join(", ")} had started` })

/** Removes the pending requests addressed to one actor from a table of them, and returns them. */
const takeWaitersOf = <W extends { readonly actor: string }>(pending: Map<number, W>, actor: string): Array<W> => {
  const taken: Array<W> = []
  for (const [reqId, waiter] of pending) {
    if (waiter.actor !== actor) continue
    pending.delete(reqId)
    taken.push(waiter)
  }
  return taken
}

/** Waits for every promise, then fails with the first failure: nothing is left running behind an early rejection. */
const settleAll = async (promises: ReadonlyArray<Promise<unknown>>): Promise<void> => {
  const failed = (await Promise.allSettled(promises)).find((r): r is PromiseRejectedResult => r.status === "rejected")
  if (failed !== undefined) throw failed.reason
}

/** Starts a cluster in this process (the driver). */
export const start = (options?: StartOptions): Promise<Cluster> => Cluster.create(options)
