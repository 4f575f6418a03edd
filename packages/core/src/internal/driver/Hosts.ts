/**
 * The driver's side of a cluster across hosts, on Effect's cluster engine (../engine.ts): the live
 * hosts are the runners its storage holds; a host that leaves them (dead, or cut off) has its actors
 * failed; placement admits this driver on each host through the host's entity, routed by the engine;
 * the driver's lease worker (Leases.ts) renews each admission, a lease, on the host's node; and an
 * actor starts through its host's node.
 */
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { Effect, type Layer, ManagedRuntime } from "effect"
import type { ClusterConfig, ClusterHost, ClusterTls } from "../../ClusterConfig.js"
import { InvalidArgumentError, ProtocolError, TimeoutError } from "../../Errors.js"
import { describe } from "../arguments.js"
import { openSocket } from "../connection.js"
import { ENGINE_CALL_TIMEOUT_MS, NodeEntity, SHARD_LOCK_EXPIRATION_MS, clientLayer, liveHosts } from "../engine.js"
import { writeFrame } from "../frame.js"
import { type HostInfo, PROTOCOL_VERSION, type ToNode } from "../messages.js"
import type { ActorProcess, ProcessLauncher, SpawnOptions } from "./ActorProcesses.js"
import { type LeaseCommand, type LeaseEvent, type LeaseWorkerData, nodeAddress } from "./Leases.js"

/**
 * How long a placement, or a host's Describe, waits for the engine: the engine retries a message it
 * cannot deliver for ever, and Postgres being down leaves no live host to place on.
 */
const PLACEMENT_TIMEOUT_MS = 5_000

/** How often the driver reads the storage's runners. */
const MEMBERSHIP_POLL_MS = 500

/** A node whose PROTOCOL_VERSION is not this driver's (none: from before protocol versions), seen at its admission. */
const otherProtocol = (host: string, protocol: number | undefined): ProtocolError =>
  new ProtocolError({
    message: `the node of host ${host} speaks ${protocol === undefined ? "a protocol from before protocol versions" : `tensorlane's protocol ${protocol}`}, this driver speaks protocol ${PROTOCOL_VERSION}: no actor was placed there. A cluster's hosts and drivers run one release of @tensorlane/core: install the driver's on host ${host} (then restart its node), or the host's here`,
  })

export class Hosts {
  private engine: ManagedRuntime.ManagedRuntime<Layer.Success<ReturnType<typeof clientLayer>>, unknown>
  /** Renews this driver's leases, whatever its main thread does; undefined once it ended (the next placement starts another). */
  private leaseWorker: Worker | undefined
  /** The latest placement on each host whose lease the worker holds: a loss reported for an earlier one changes nothing. */
  private readonly leases = new Map<string, number>()
  private placements = 0
  private closed = false

  constructor(
    private readonly config: ClusterConfig,
    private readonly credentials: ClusterTls,
    private readonly clusterId: string,
    private readonly execArgv: ReadonlyArray<string>,
    /** A host left the storage's runners (its node died, or was cut off): its actors are gone. */
    private readonly lost: (host: string, reason: string) => void,
  ) {
    this.engine = this.join()
    this.leaseWorker = this.startLeaseWorker()
  }

  private startLeaseWorker(): Worker {
    const worker = new Worker(fileURLToPath(new URL("./lease-main.js", import.meta.url)), {
      workerData: { config: this.config.file, driver: this.credentials.identity, clusterId: this.clusterId } satisfies LeaseWorkerData,
    })
    // The driver's process ends when its own work does: the leases die with it.
    worker.unref()
    worker.on("message", (event: LeaseEvent) => {
      if (this.leases.get(event.lost) === event.placement) this.leaseLost(event.lost, event.reason)
    })
    worker.on("error", (error) => this.workerEnded(worker, `failed: ${error.message}`))
    worker.on("exit", (code) => this.workerEnded(worker, `exited (code ${code})`))
    return worker
  }

  /** Nothing renews the leases any more: every node ends this driver's actors within DRIVER_LEASE_MS. */
  private workerEnded(worker: Worker, how: string): void {
    if (this.closed || worker !== this.leaseWorker) return
    this.leaseWorker = undefined
    for (const name of [...this.leases.keys()]) this.leaseLost(name, `this driver's lease worker ${how}: its leases are no longer renewed`)
  }

  private leaseLost(name: string, reason: string): void {
    this.leases.delete(name)
    this.lost(name, reason)
  }

  /** Joins the engine as a client, and watches the storage's runners. */
  private join() {
    const engine = ManagedRuntime.make(clientLayer(this.config, this.credentials))
    engine.runFork(this.watch())
    return engine
  }

  /**
   * Runs `effect` on the engine; its failure is `what` failing with a TimeoutError. An engine that
   * could not join (Postgres was down when the driver started) is joined again on the next call.
   */
  private async run<A>(what: string, effect: Effect.Effect<A, unknown, Layer.Success<ReturnType<typeof clientLayer>>>): Promise<A> {
    const engine = this.engine
    try {
      return await engine.runPromise(effect)
    } catch (error) {
      if (engine.cachedContext === undefined && this.engine === engine && !this.closed) {
        this.engine = this.join()
        void engine.dispose()
      }
      throw this.unplaced(what, error)
    }
  }

  /**
   * Fails the actors of the hosts that are not among the storage's live runners. A read of the
   * storage concludes nothing until it has answered for SHARD_LOCK_EXPIRATION_MS: after an outage the
   * runners' heartbeats are stale until they refresh them.
   */
  private watch() {
    const hosts = this
    return Effect.gen(function* () {
      let answeringSince: number | undefined
      while (true) {
        yield* Effect.sleep(MEMBERSHIP_POLL_MS)
        const live = yield* Effect.result(liveHosts(hosts.config))
        if (live._tag === "Failure") {
          answeringSince = undefined
          continue
        }
        answeringSince ??= Date.now()
        if (Date.now() - answeringSince < SHARD_LOCK_EXPIRATION_MS) continue
        const names = new Set(live.success.map((h) => h.name))
        for (const h of hosts.config.hosts) if (!names.has(h.name)) hosts.lost(h.name, "its runner left the cluster's runners: it died or was cut off")
      }
    })
  }

  private host(name: unknown, argument: string): ClusterHost {
    const host = this.config.hosts.find((h) => h.name === name)
    if (host === undefined) {
      throw new InvalidArgumentError({
        message: `${describe(name)} is not a host of cluster ${this.config.name} (its hosts: ${this.config.hosts.map((h) => h.name).join(", ")})`,
        argument,
      })
    }
    return host
  }

  /** The live hosts, in the config's order, with what their nodes report (a node that does not answer within PLACEMENT_TIMEOUT_MS is left out). */
  async list(): Promise<Array<HostInfo>> {
    const config = this.config
    const listed = Effect.gen(function* () {
      const client = yield* NodeEntity.client
      const live = yield* liveHosts(config)
      const infos = yield* Effect.forEach(live, (h) => Effect.result(client(h.name).Describe().pipe(Effect.timeout(PLACEMENT_TIMEOUT_MS))), { concurrency: "unbounded" })
      return infos.flatMap((r) => (r._tag === "Success" ? [r.success] : []))
    })
    return this.run("list the hosts", listed)
  }

  private unplaced(what: string, error: unknown): TimeoutError | InvalidArgumentError | ProtocolError {
    if (error instanceof InvalidArgumentError || error instanceof ProtocolError) return error
    return new TimeoutError({
      message: `could not ${what} of cluster ${this.config.name} within ${PLACEMENT_TIMEOUT_MS} ms: the cluster's storage (Postgres at ${this.config.postgres.host}:${this.config.postgres.port}) did not answer, or a host's node is not among its live runners (${String((error as { _tag?: unknown })?._tag ?? error)})`,
      timeoutMs: PLACEMENT_TIMEOUT_MS,
    })
  }

  /**
   * Admits this driver on each host, through the engine, once the host is among the storage's live
   * runners (a node just started registers within a refresh of the engine's assignments).
   */
  private admit(names: ReadonlyArray<string>) {
    const { config, clusterId } = this
    const driver = this.credentials.identity
    return Effect.gen(function* () {
      const client = yield* NodeEntity.client
      while (true) {
        const live = yield* Effect.result(liveHosts(config))
        if (live._tag === "Success" && names.every((name) => live.success.some((h) => h.name === name))) break
        yield* Effect.sleep(MEMBERSHIP_POLL_MS)
      }
      yield* Effect.forEach(
        names,
        (name) =>
          client(name)
            .Admit({ clusterId, driver })
            .pipe(Effect.flatMap(({ protocol }) => (protocol === PROTOCOL_VERSION ? Effect.void : Effect.fail(otherProtocol(name, protocol))))),
        { concurrency: "unbounded", discard: true },
      )
    }).pipe(Effect.timeout(PLACEMENT_TIMEOUT_MS))
  }

  /** The host of each actor of a spawn call, with a session open on each (SpawnOptions says the placement). */
  async place(options: SpawnOptions, count: number): Promise<Array<string>> {
    if (options.host !== undefined && options.hosts !== undefined) {
      throw new InvalidArgumentError({ message: "spawn takes host or hosts, not both", argument: "hosts" })
    }
    if (options.hosts !== undefined && (!Array.isArray(options.hosts) || options.hosts.length === 0)) {
      throw new InvalidArgumentError({ message: `hosts must be a non-empty array of host names, not ${describe(options.hosts)}`, argument: "hosts" })
    }
    const names =
      options.host !== undefined ? [this.host(options.host, "host").name] : (options.hosts ?? this.config.hosts.map((h) => h.name)).map((n) => this.host(n, "hosts").name)
    const distinct = [...new Set(names)]
    await this.run(`place actors on ${distinct.join(", ")}`, this.admit(distinct))
    this.leaseWorker ??= this.startLeaseWorker()
    for (const name of distinct) {
      const placement = ++this.placements
      this.leases.set(name, placement)
      this.leaseWorker.postMessage({ hold: name, placement } satisfies LeaseCommand)
    }
    return Array.from({ length: count }, (_, i) => names[i % names.length]!)
  }

  /** Starts an actor through its host's node: the connection carries its Spawn, then its control connection. */
  readonly launcher: ProcessLauncher = ({ id, definition, env, host }) => {
    const { socket } = openSocket(nodeAddress(this.host(host, "host")), this.credentials.client)
    socket.setNoDelay(true)
    writeFrame(socket, {
      _tag: "Spawn",
      protocol: PROTOCOL_VERSION,
      clusterId: this.clusterId,
      actorId: id,
      moduleUrl: definition.moduleUrl,
      execArgv: [...this.execArgv],
      env: { ...env },
    } satisfies ToNode)
    const process: ActorProcess = {
      control: socket,
      host,
      kill: () => socket.destroy(),
      ended: () => socket.destroyed,
      onExit: (listener) => socket.once("close", () => listener(`: its connection through host ${host}'s node closed`)),
    }
    return process
  }

  /** Has the nodes end this driver's actors (each within ENGINE_CALL_TIMEOUT_MS), and leaves the engine. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.leases.clear()
    await this.leaseWorker?.terminate()
    const { config, clusterId } = this
    const kill = Effect.gen(function* () {
      const client = yield* NodeEntity.client
      yield* Effect.forEach(config.hosts, (h) => Effect.ignore(client(h.name).Kill({ clusterId }).pipe(Effect.timeout(ENGINE_CALL_TIMEOUT_MS))), {
        concurrency: "unbounded",
        discard: true,
      })
    })
    await this.engine.runPromise(kill).catch(() => undefined)
    await this.engine.dispose()
  }
}
