/**
 * The driver: starts actor processes, submits method calls, owns every object (the directory with
 * reference counts), resolves refs, and manages collective groups. This is the Promise face; the
 * Effect face (`TensorlaneCluster`) wraps the same object. The work is done by the modules of
 * `internal/driver/`: ActorProcesses (start, supervision, death), Dispatch (calls), Objects (the
 * owner's side of objects), Groups (collective groups and their all-gather) and AgentLinks (requests
 * to the actors' transfer agents); this class wires them together and checks what users pass.
 */
import { randomUUID } from "node:crypto"
import * as dgram from "node:dgram"
import { isIPv6 } from "node:net"
import { join } from "node:path"
import * as Tracer from "effect/Tracer"
import type { ActorDefinition, ActorHandle } from "./Actor.js"
import { type ClusterConfig, type ClusterHost, type ClusterTls, loadClusterConfig, tlsOptionsFor } from "./ClusterConfig.js"
import { type ActorDiedError, InvalidArgumentError, TransferError, UnsupportedOperationError } from "./Errors.js"
import type { GetOptions, PutOptions } from "./InActor.js"
import { recordTransfer } from "./Metrics.js"
import { ObjectRef, type RefTracker, requireOpen, requireUsableRef } from "./ObjectRef.js"
import { checkOptions, checkTimeout, describe } from "./internal/arguments.js"
import { callerFolder } from "./internal/callerModule.js"
import { createClusterDir, removeClusterDir } from "./internal/clusterDir.js"
import { type ActorMessage, ActorProcesses, type ActorRecord, type SpawnOptions, localLauncher } from "./internal/driver/ActorProcesses.js"
import { AgentLinks } from "./internal/driver/AgentLinks.js"
import { Dispatch } from "./internal/driver/Dispatch.js"
import { DroppedRefs, droppedRefAllowance } from "./internal/driver/DroppedRefs.js"
import type { DriverContext } from "./internal/driver/DriverContext.js"
import { type CollectiveGroup, type GroupOptions, Groups } from "./internal/driver/Groups.js"
import type { Hosts } from "./internal/driver/Hosts.js"
import { Objects } from "./internal/driver/Objects.js"
import { recycleCapacity } from "./internal/hostMemoryCache.js"
import type { ActorInspection, HostInfo, ToActor } from "./internal/messages.js"
import { ObjectDirectory } from "./internal/objectDirectory.js"
import { ProcessRuntime } from "./internal/processRuntime.js"
import { normalizeSpecifier } from "./internal/transportRegistry.js"

export type { CollectiveGroup, GroupOptions, HostInfo, SpawnOptions }

export interface StartOptions {
  /**
   * Transport modules by specifier: package names, or paths relative to the module that calls
   * `start()` (or `TensorlaneCluster.layer`); the working directory where no module calls it (a REPL).
   */
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
  /**
   * A cluster across hosts: its config file (`tensorlane cluster init` writes it). The driver then
   * starts actors through the nodes of the config's hosts (`tensorlane node`) and talks to them under
   * mutual TLS; without it every actor is a child process of the driver on this machine.
   */
  readonly cluster?: string
  /** The driver's name in the cluster config (its certificate); default its only driver. */
  readonly driver?: string
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
const DEFAULT_INSPECT_TIMEOUT_MS = 30_000

export class Cluster implements AsyncDisposable {
  /** This cluster's random id, carried by its refs and handles (ids like `driver.1` repeat from cluster to cluster). */
  private readonly identity: { readonly id: string; closed: boolean }
  private readonly directory: ObjectDirectory
  private readonly processes: ActorProcesses
  private readonly agents: AgentLinks
  private readonly groups: Groups
  private readonly objects: Objects
  private readonly dispatch: Dispatch
  private readonly hostSessions: Hosts | undefined

  private constructor(
    private readonly dir: string,
    identity: { readonly id: string; closed: boolean },
    transports: ReadonlyArray<string>,
    options: StartOptions,
    transferTimeoutMs: number,
    readonly runtime: ProcessRuntime,
    tracker: RefTracker,
    directory: ObjectDirectory,
    across: { readonly config: ClusterConfig; readonly credentials: ClusterTls; readonly Hosts: typeof Hosts } | undefined,
  ) {
    this.identity = identity
    this.directory = directory
    const tracer = options.tracer ?? Tracer.nativeTracer
    const driver: DriverContext = { identity, transferTimeoutMs, directory, tracker, runtime, recordTransfer: (stat) => recordTransfer(stat, tracer) }
    const execArgv = options.execArgv ?? []
    const hosts = across && new across.Hosts(across.config, across.credentials, identity.id, execArgv, (host, reason) => this.hostLost(host, reason))
    this.hostSessions = hosts
    this.processes = new ActorProcesses(
      driver,
      { dir, transports, execArgv },
      { message: (r, message) => this.onMessage(r, message), died: (r, died) => this.onDeath(r, died) },
      hosts?.launcher ?? localLauncher,
      (spawnOptions, count) => (hosts ? hosts.place(spawnOptions, count) : onThisMachine(spawnOptions, count)),
    )
    this.agents = new AgentLinks((r, message, reply) => this.groups.gather(r.id, message, reply), across?.credentials.client)
    this.groups = new Groups(driver, this.processes, this.agents)
    this.objects = new Objects(driver, this.processes, this.agents, this.groups)
    this.dispatch = new Dispatch(driver, this.processes, this.agents, this.groups, this.objects)
  }

  /** @internal use `start()`. `base`: the folder relative transport paths are taken from. */
  static async create(options: StartOptions, base: string): Promise<Cluster> {
    const transferTimeoutMs = checkTimeout(options.transferTimeoutMs, "transferTimeoutMs") ?? DEFAULT_TRANSFER_TIMEOUT_MS
    const specifiers = (options.transports ?? []).map((specifier) => normalizeSpecifier(specifier, base))
    const identity = { id: randomUUID(), closed: false }
    let cluster: Cluster | undefined
    const dropped = new DroppedRefs(droppedRefAllowance(recycleCapacity()), () => identity.closed)
    // Nothing is freed before the cluster exists: it holds no object yet.
    const directory = new ObjectDirectory(
      (entry) => {
        dropped.freed(entry)
        cluster!.objects.free(entry)
      },
      (entry) => dropped.made(entry),
      () => dropped.created(),
    )
    const tracker: RefTracker = { acquire: (id) => directory.acquire(id), release: (id) => directory.release(id), cluster: identity }
    // The cluster engine's modules (Hosts) load only for a cluster across hosts: they would double the
    // driver's heap, and the cost of each collection DroppedRefs runs with it.
    const across =
      options.cluster === undefined
        ? undefined
        : { ...driverCredentials(options.cluster, options.driver), Hosts: (await import("./internal/driver/Hosts.js")).Hosts }
    const address = across && (await addressToward(across.config.hosts[0]!))
    const dir = createClusterDir()
    const runtime = await ProcessRuntime.start({
      processId: "driver",
      cluster: identity,
      address: join(dir, "driver.sock"),
      member: across && { config: across.config.file, member: across.credentials.identity, address },
      transports: specifiers,
      parentPid: undefined,
      makeRef: (id) => new ObjectRef(id, tracker),
    }).catch((error) => {
      removeClusterDir(dir)
      throw error
    })
    cluster = new Cluster(dir, identity, specifiers, options, transferTimeoutMs, runtime, tracker, directory, across)
    return cluster
  }

  /** Names of the registered transports. */
  get transportNames(): ReadonlyArray<string> {
    return [...this.runtime.transports.keys()]
  }

  /** The id its refs and handles carry. */
  get id(): string {
    return this.identity.id
  }

  /**
   * The hosts of a cluster across hosts whose nodes answer, in the config's order: CPUs, memory,
   * GPUs and the transport packages installed on each. Only for a cluster started with `cluster`.
   */
  async hosts(): Promise<Array<HostInfo>> {
    requireOpen(this.identity)
    if (this.hostSessions === undefined) throw new UnsupportedOperationError({ message: "hosts() lists the hosts of a cluster started with a cluster config (start({ cluster }))" })
    return this.hostSessions.list()
  }

  /** Starts `count` actor processes of a definition (always an array). */
  async spawn<D extends ActorDefinition>(definition: D, options?: SpawnOptions): Promise<Array<ActorHandle<D>>> {
    requireOpen(this.identity)
    const records = await this.processes.spawn(definition, checkOptions(options, "options"))
    return records.map((r) => this.processes.handleOf<D>(r, this.dispatch.submit))
  }

  /**
   * Ends an actor at once (SIGKILL), however busy or stuck it is: its pending and later calls, and the
   * objects it produced, fail with ActorDiedError as if it had died (small object-store values, whose
   * bytes the driver holds, stay readable). The other actors go on. Resolves once the process is gone.
   */
  async kill(actor: { actorId: string }): Promise<void> {
    requireOpen(this.identity)
    const record = this.processes.actorOf(actor)
    this.processes.died(record, new Error("cluster.kill ended it"))
    await record.exited
  }

  /**
   * Cancels the call that makes `ref`: its ref, and the calls that take it, fail with CancelledError
   * at once. A call not yet running never runs (one receiving its arguments takes them in first: their
   * producers are sending); a running call sees its `cancellationSignal()` abort, and what it returns
   * anyway is freed. Only that call is cancelled: not the calls that make its arguments, nor its
   * actor's other calls. A finished call (or a put) is left as it is.
   */
  cancel(ref: ObjectRef<unknown>): void {
    requireOpen(this.identity)
    requireUsableRef(ref, this.identity)
    this.dispatch.cancel(ref)
  }

  /** Resolves refs to their values. Waits without limit unless `timeoutMs` is given. */
  async get<R extends ObjectRef<unknown>>(ref: R, options?: GetOptions): Promise<Unref<R>>
  async get<R extends ReadonlyArray<ObjectRef<unknown>>>(refs: R, options?: GetOptions): Promise<{ [K in keyof R]: Unref<R[K]> }>
  async get(refs: ObjectRef<unknown> | ReadonlyArray<ObjectRef<unknown>>, options?: GetOptions): Promise<unknown> {
    requireOpen(this.identity)
    return this.objects.get(refs, checkOptions(options, "options"))
  }

  /** Stores a value in the driver for actors to read (object-store or a one-sided transport). */
  async put<T>(value: T, options?: PutOptions): Promise<ObjectRef<T>> {
    requireOpen(this.identity)
    return this.objects.put(value, checkOptions(options, "options"))
  }

  /**
   * Places a received copy of an object in each receiver, in one operation: a collective broadcast
   * when the object's transport has one and the receivers are the rest of its group, else a transfer
   * to each. The copies stay until the object is freed, and calls on those receivers that take the
   * ref use them without another transfer (the weight-sync case).
   */
  async broadcast(ref: ObjectRef<unknown>, receivers: ReadonlyArray<{ actorId: string }>, options?: { timeoutMs?: number }): Promise<void> {
    requireOpen(this.identity)
    requireUsableRef(ref, this.identity)
    const limitMs = checkTimeout(checkOptions(options, "options").timeoutMs, "timeoutMs")
    if (!Array.isArray(receivers)) throw new InvalidArgumentError({ message: `broadcast takes an array of actor handles, not ${describe(receivers)}`, argument: "receivers" })
    const receiving = receivers.map((r) => this.processes.actorOf(r))
    await this.objects.broadcast(this.directory.require(ref.id), receiving, limitMs)
  }

  listGroups(): ReadonlyArray<{ name: string; backend: string; members: ReadonlyArray<string> }> {
    return this.groups.list()
  }

  async createCollectiveGroup(actors: ReadonlyArray<{ actorId: string }>, options: GroupOptions): Promise<CollectiveGroup> {
    requireOpen(this.identity)
    return this.groups.create(actors, options)
  }

  /** What every process still holds: empty lists mean nothing leaked. An actor's main thread answers, so a busy one delays it. */
  async inspect(options?: { timeoutMs?: number }): Promise<ClusterInspection> {
    requireOpen(this.identity)
    const timeoutMs = checkTimeout(checkOptions(options, "options").timeoutMs, "timeoutMs") ?? DEFAULT_INSPECT_TIMEOUT_MS
    const driver = await this.runtime.inspect()
    const actors = await this.processes.inspect(timeoutMs)
    return {
      objects: [...this.directory.values()].map((e) => e.id),
      groups: this.groups.names(),
      processes: { driver, ...actors.processes },
      unresponsive: actors.unresponsive,
    }
  }

  /**
   * Stops every actor process, those still starting too, and the driver's agent; each actor first
   * finishes the releases it has under way. Idempotent.
   */
  async shutdown(): Promise<void> {
    if (this.identity.closed) return
    this.identity.closed = true
    this.objects.flushFrees()
    await this.processes.shutdown()
    await this.hostSessions?.close()
    await this.runtime.close()
    removeClusterDir(this.dir)
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.shutdown()
  }

  private onMessage(record: ActorRecord, message: ActorMessage): void {
    switch (message._tag) {
      case "Result":
        this.dispatch.result(record, message)
        return
      case "Put":
        this.objects.actorPut(record, message)
        return
      case "Resolve":
        this.objects.resolveFor(record, message)
        return
      case "AddRefs":
      case "DropRefs":
        this.objects.borrows(record, message)
        return
      case "AllGather":
        this.groups.gather(record.id, message, (answer) => record.control.send(answer satisfies ToActor))
        return
    }
  }

  /** A host's node is gone or cut off: every actor on it is dead. */
  private hostLost(host: string, reason: string): void {
    for (const r of this.processes.live()) {
      if (r.process.host === host) this.processes.died(r, new Error(`its host ${host} is unreachable (${reason})`))
    }
  }

  /** An actor died: what it took part in fails, and every other process hears of it. */
  private onDeath(record: ActorRecord, died: ActorDiedError): void {
    this.dispatch.actorDied(record, died)
    this.objects.actorDied(record.id, died, record.process.host)
    this.agents.actorDied(record, died)
    this.groups.memberDied(record.id, died)
    this.runtime.peerDied(record.id)
    for (const other of this.processes.live()) {
      other.control.send({ _tag: "PeerDied", peer: record.id } satisfies ToActor)
      if (this.agents.connected(other)) this.agents.post(other, { _tag: "PeerDied", peer: record.id }).catch(() => undefined)
    }
  }
}

/** The config and TLS options of the driver of a cluster across hosts. */
const driverCredentials = (file: string, name: string | undefined): { config: ClusterConfig; credentials: ClusterTls } => {
  const config = loadClusterConfig(file)
  const driver = name ?? (config.drivers.length === 1 ? config.drivers[0]!.name : undefined)
  if (driver === undefined || !config.drivers.some((d) => d.name === driver)) {
    throw new InvalidArgumentError({
      message: `${name === undefined ? "start needs the driver's name (driver)" : `${name} is not a driver`} of cluster ${config.name} (its drivers: ${config.drivers.map((d) => d.name).join(", ") || "none"})`,
      argument: "driver",
    })
  }
  return { config, credentials: tlsOptionsFor(config, driver) }
}

/**
 * This machine's address toward a host (the source address of its route there): where the driver's
 * agent serves what the driver puts to actors on the hosts. Connecting a UDP socket sends nothing.
 */
const addressToward = (host: ClusterHost): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = dgram.createSocket(isIPv6(host.address) ? "udp6" : "udp4")
    socket.once("error", (error) => {
      socket.close()
      reject(new TransferError({ message: `no route from this machine to host ${host.name} at ${host.address}: ${error.message}`, transport: "control" }))
    })
    socket.connect(host.port, host.address, () => {
      const { address } = socket.address()
      socket.close()
      resolve(address)
    })
  })

/** Placement on one machine: every actor is a child of the driver. */
const onThisMachine = (options: SpawnOptions, count: number): Promise<Array<undefined>> => {
  if (options.host !== undefined || options.hosts !== undefined) {
    return Promise.reject(
      new InvalidArgumentError({
        message: "host and hosts place actors on the hosts of a cluster started with a cluster config (start({ cluster }))",
        argument: options.host !== undefined ? "host" : "hosts",
      }),
    )
  }
  return Promise.resolve(Array.from({ length: count }, () => undefined))
}

/** Starts a cluster in this process (the driver). */
export const start = (options: StartOptions = {}): Promise<Cluster> => Cluster.create(options, callerFolder())
