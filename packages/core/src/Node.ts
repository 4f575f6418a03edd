/**
 * A host's node (`tensorlane node --config cluster.json --name h2`): the long-running process of a
 * host of a cluster across hosts. It listens on the host's configured address under mutual TLS and
 * starts, for the drivers of the cluster, the actor processes they place on its host: the same
 * actor code as on one machine, with the host's address for the data planes (gloo's pairs, UCX's
 * interface) and the host's credentials for their transfer agents. It owns them: they are its
 * children. Its host's membership of the cluster is Effect's: the node is a runner of the cluster's
 * engine (internal/engine.ts), which admits a driver's spawns here (Admit), ends them (Kill) and
 * says what the host is (Describe). An actor ends when its driver's connection closes; a driver's
 * actors end when its admission, a lease that the driver renews on this node's own port, runs out
 * (DRIVER_LEASE_MS: the driver is cut off or stalled); and every driver's actors end when this
 * runner is cut off from the cluster (neither Postgres nor any other runner answers for
 * CUT_OFF_LIMIT_MS). Postgres alone being down keeps them.
 */
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import type * as tls from "node:tls"
import { Effect, Layer, ManagedRuntime } from "effect"
import { Runners } from "effect/cluster"
import { type ClusterConfig, type ClusterHost, type ClusterTls, loadClusterConfig, tlsOptionsFor } from "./ClusterConfig.js"
import { ActorDiedError, ActorLimitError, InvalidArgumentError, NodeStartError, ProtocolError } from "./Errors.js"
import { CLI_COMMAND } from "./NativeAddon.js"
import { type LaunchedActor, launchActor } from "./internal/actorLaunch.js"
import { ENGINE_CALL_TIMEOUT_MS, NodeEntity, liveHosts, runnerAddressOf, runnerLayer } from "./internal/engine.js"
import { tlsServer } from "./internal/connection.js"
import { FrameReader, writeFrame } from "./internal/frame.js"
import {
  DRIVER_LEASE_MS,
  type FromActor,
  type HostInfo,
  type LeaseRenewal,
  MAX_NODE_REQUEST_BYTES,
  PROTOCOL_VERSION,
  type ToNode,
  decodeToNode,
} from "./internal/messages.js"
import { CLUSTER_CONFIG_VARIABLE, CLUSTER_MEMBER_VARIABLE } from "./internal/node/variables.js"
import { SHUTDOWN_GRACE_MS } from "./internal/processRuntime.js"
import { actorTypeScriptFlags } from "./internal/typeScript.js"
import { settledWithin } from "./internal/waits.js"
import { toWireError } from "./internal/wireError.js"

export interface NodeOptions {
  /** The cluster config file (`tensorlane cluster init` writes it). */
  readonly config: string
  /** This host's name in it. */
  readonly name: string
}

/** Transport packages a node reports as installed when they resolve from where tensorlane is installed. */
const TRANSPORT_PACKAGES = ["@tensorlane/transport-gloo", "@tensorlane/transport-nixl", "@tensorlane/transport-nccl", "@tensorlane/symmetric-mem"]

/** How long a connection to a node has for its first message once its TLS handshake is done, however slowly it trickles in. */
const FIRST_MESSAGE_TIMEOUT_MS = 10_000

/** How long a finished connection waits for its peer to close its side before it is destroyed. */
const FINISH_GRACE_MS = 2_000

/** The actors a node runs at once by default: 4 per CPU of its host (`maxActors` of the host in the cluster config sets it). */
const ACTORS_PER_CPU = 4

/** How long a runner cut off from Postgres and from every other runner keeps its drivers' actors. */
const CUT_OFF_LIMIT_MS = 3_000

/** How often the node looks for drivers whose lease ran out. */
const LEASE_CHECK_MS = 500

/** The drivers admitted here (by cluster id), with their actors on this host and their connections. */
interface AdmittedDriver {
  readonly driver: string
  readonly actors: Map<ChildProcess, tls.TLSSocket>
  /** When the driver was admitted or last renewed its lease (performance.now()). */
  renewedAt: number
}

/**
 * Ends this side of a connection and drops what the peer still sends, so that the socket closes once
 * the peer ends its side too: unread (unpiped, or never read), it would never see the peer's end and
 * would stay open, keeping the server from closing. A peer that keeps its side open past
 * FINISH_GRACE_MS has the connection destroyed.
 */
const finish = (socket: tls.TLSSocket): void => {
  socket.end()
  socket.resume()
  setTimeout(() => socket.destroy(), FINISH_GRACE_MS).unref()
}

/** A spawn refused: the driver hears it as its actor's InitFailed. */
const refuseSpawn = (socket: tls.TLSSocket, error: unknown): void => {
  writeFrame(socket, { _tag: "InitFailed", error: toWireError(error) } satisfies FromActor)
  finish(socket)
}

/**
 * Why a driver's first message is refused for its protocol, or undefined: a Spawn (its `_tag` and
 * `protocol` keep their form in every release) of a driver whose PROTOCOL_VERSION is another, or
 * from before protocol versions (none).
 */
const otherProtocol = (header: unknown, host: string, driver: string): ProtocolError | undefined => {
  if (typeof header !== "object" || header === null) return undefined
  const { _tag, protocol, actorId } = header as { _tag?: unknown; protocol?: unknown; actorId?: unknown }
  if (_tag !== "Spawn" || protocol === PROTOCOL_VERSION) return undefined
  const spoken = protocol === undefined ? "a protocol from before protocol versions" : `protocol ${String(protocol).slice(0, 32)}`
  const actor = typeof actorId === "string" && actorId.length <= 256 ? actorId : "its actor"
  return new ProtocolError({
    message: `the node of host ${host} speaks tensorlane's protocol ${PROTOCOL_VERSION}, driver ${driver} speaks ${spoken}: ${actor} was not started. A cluster's hosts and drivers run one release of @tensorlane/core: install the same one on host ${host} (then restart its node) and on the driver's machine`,
  })
}

const installedTransports = (): Array<string> =>
  TRANSPORT_PACKAGES.filter((name) => {
    try {
      import.meta.resolve(name)
      return true
    } catch {
      return false
    }
  })

const gpuCount = (): number => {
  try {
    return fs.readdirSync("/dev").filter((name) => /^nvidia\d+$/.test(name)).length
  } catch {
    return 0
  }
}

/** What to do about an address and port the node could not listen on, by the system's error code. */
const listenFix = (code: string | undefined, file: string): string => {
  switch (code) {
    case "EADDRINUSE":
      return `another process listens there (this host's node, already running?): stop it, or give the host another port in ${file}`
    case "EADDRNOTAVAIL":
      return `the address is not this machine's: run the node on the machine that has it, or correct the host's address in ${file}`
    case "EACCES":
      return `a port below 1024 needs privileges: give the host a port of 1024 or more in ${file}`
    default:
      return `give the host an address and port this machine can listen on in ${file}`
  }
}

/** The system's error under a listen failure: Node's own, or the one under an Effect socket server's failure. */
const systemError = (error: unknown): { readonly code?: string; readonly message?: string } | undefined =>
  (error as { reason?: { cause?: { code?: string; message?: string } } })?.reason?.cause ?? (error as { code?: string; message?: string } | undefined)

const cannotListen = (config: ClusterConfig, host: ClusterHost, port: number, whose: string, error: unknown): NodeStartError => {
  const cause = systemError(error)
  return new NodeStartError({
    message: `node ${host.name} cannot listen on ${host.address}:${port}${whose}: ${cause?.message ?? String(error)}; ${listenFix(cause?.code, config.file)}`,
    host: host.name,
  })
}

/**
 * The engine's start failing, as what the user can act on: Postgres not answering or refusing the
 * cluster's role, or the engine's port taken; anything else as it came.
 */
const engineFailure = (config: ClusterConfig, host: ClusterHost, error: unknown): unknown => {
  const tag = (error as { _tag?: unknown } | undefined)?._tag
  if (tag === "SocketServerError") return cannotListen(config, host, runnerAddressOf(host).port, ", the cluster engine's port (the one after the host's)", error)
  if (tag !== "SqlError") return error
  const pg = config.postgres
  const cause = systemError(error)?.message
  return new NodeStartError({
    message:
      `node ${host.name} cannot use the cluster's Postgres at ${pg.host}:${pg.port} (database ${pg.database} as ${pg.user}): ` +
      `${(error as Error).message}${cause === undefined ? "" : ` (${cause})`}; start it, or make it reachable from this host, ` +
      `then start the node again (\`${CLI_COMMAND} doctor --cluster ${config.file}\` checks the connection, its TLS and the role)`,
    host: host.name,
  })
}

export class TensorlaneNode {
  private readonly drivers = new Map<string, AdmittedDriver>()
  /** The connections accepted and not closed: closing the node destroys those left. */
  private readonly sockets = new Set<tls.TLSSocket>()
  private readonly maxActors: number
  private readonly server: tls.Server
  private engine: { readonly dispose: () => Promise<void> } | undefined
  private leaseWatch: NodeJS.Timeout | undefined
  private closed = false

  private constructor(
    readonly host: ClusterHost,
    private readonly config: ClusterConfig,
    private readonly credentials: ClusterTls,
  ) {
    this.maxActors = host.maxActors ?? ACTORS_PER_CPU * os.availableParallelism()
    this.server = tlsServer(credentials.server, (socket) => this.accept(socket))
    // Each actor holds one connection; as many again may be in their handshake, first message or finish.
    this.server.maxConnections = 2 * this.maxActors
  }

  /**
   * Loads the config and the host's credentials, listens on the host's address and port, and joins
   * the cluster's engine; NodeStartError where a port is taken or Postgres cannot be used.
   */
  static async start(options: NodeOptions): Promise<TensorlaneNode> {
    const config = loadClusterConfig(options.config)
    const host = config.hosts.find((h) => h.name === options.name)
    if (host === undefined) {
      throw new InvalidArgumentError({ message: `${options.name} is not a host of ${config.file} (its hosts: ${config.hosts.map((h) => h.name).join(", ")})`, argument: "name" })
    }
    const node = new TensorlaneNode(host, config, tlsOptionsFor(config, host.name))
    try {
      await new Promise<void>((resolve, reject) => {
        node.server.once("error", reject)
        node.server.listen({ host: host.address, port: host.port }, () => resolve())
      })
    } catch (error) {
      throw cannotListen(config, host, host.port, "", error)
    }
    node.leaseWatch = node.watchLeases()
    const entity = NodeEntity.toLayer(
      NodeEntity.of({
        Describe: () => Effect.sync(() => node.info()),
        Admit: ({ payload }) => Effect.try({ try: () => node.admit(payload.clusterId, payload.driver), catch: (error) => error as InvalidArgumentError }),
        Kill: ({ payload }) => Effect.sync(() => node.endDriver(payload.clusterId)),
      }),
    )
    const engine = ManagedRuntime.make(runnerLayer(config, host, node.credentials, Layer.merge(entity, node.cutOffWatch())))
    node.engine = engine
    try {
      await engine.context()
    } catch (error) {
      await node.close()
      throw engineFailure(config, host, error)
    }
    return node
  }

  /**
   * Ends every driver's actors here once this runner is cut off from the cluster: the storage has
   * not answered, nor has any other host's runner, for CUT_OFF_LIMIT_MS. The drivers on the other
   * side have taken this host's actors for dead by then (it left the storage's runners). Each
   * check runs in a loop of its own, so one that hangs on a cut link delays nothing.
   */
  private cutOffWatch() {
    const node = this
    const others = this.config.hosts.filter((h) => h.name !== this.host.name)
    const period = CUT_OFF_LIMIT_MS / 6
    return Layer.effectDiscard(
      Effect.gen(function* () {
        const runners = yield* Runners.Runners
        let reachedAt = Date.now()
        const reaching = <R>(check: Effect.Effect<unknown, unknown, R>) =>
          Effect.forkScoped(
            Effect.forever(
              Effect.gen(function* () {
                if (yield* Effect.isSuccess(check.pipe(Effect.timeout(ENGINE_CALL_TIMEOUT_MS)))) reachedAt = Date.now()
                yield* Effect.sleep(period)
              }),
            ),
          )
        yield* reaching(liveHosts(node.config))
        for (const h of others) yield* reaching(runners.ping(runnerAddressOf(h)))
        yield* Effect.forkScoped(
          Effect.forever(
            Effect.gen(function* () {
              yield* Effect.sleep(period)
              if (Date.now() - reachedAt >= CUT_OFF_LIMIT_MS) for (const clusterId of [...node.drivers.keys()]) node.endDriver(clusterId)
            }),
          ),
        )
      }),
    )
  }

  /**
   * Ends the actors of every driver whose lease ran out. A check that runs late (this process was
   * stalled) concludes nothing: renewals may be waiting, unread, behind the stall.
   */
  private watchLeases(): NodeJS.Timeout {
    let checkedAt = performance.now()
    const timer = setInterval(() => {
      const now = performance.now()
      const late = now - checkedAt > 2 * LEASE_CHECK_MS
      checkedAt = now
      if (late) return
      for (const [clusterId, admitted] of [...this.drivers]) if (now - admitted.renewedAt >= DRIVER_LEASE_MS) this.endDriver(clusterId)
    }, LEASE_CHECK_MS)
    timer.unref()
    return timer
  }

  /** What this node reports of its host. */
  info(): HostInfo {
    return {
      name: this.host.name,
      address: this.host.address,
      cpus: os.availableParallelism(),
      memoryBytes: os.totalmem(),
      gpus: gpuCount(),
      transports: installedTransports(),
    }
  }

  private accept(socket: tls.TLSSocket): void {
    this.sockets.add(socket)
    socket.once("close", () => this.sockets.delete(socket))
    let peer: string
    try {
      peer = this.credentials.peerName(socket)
    } catch {
      socket.destroy()
      return
    }
    // Only a driver of the cluster starts actors; a host's certificate does not.
    if (!this.config.drivers.some((d) => d.name === peer)) {
      socket.destroy()
      return
    }
    socket.setNoDelay(true)
    // A connection says what it is for at once, or is dropped: none is kept open for nothing, nor by
    // a byte now and then.
    const deadline = setTimeout(() => socket.destroy(), FIRST_MESSAGE_TIMEOUT_MS)
    socket.once("close", () => clearTimeout(deadline))
    const reader = new FrameReader(
      (frame) => {
        clearTimeout(deadline)
        socket.off("data", onData)
        // Before the message's form is checked: a driver of another release may send another form.
        const refused = otherProtocol(frame.header, this.host.name, peer)
        if (refused !== undefined) {
          refuseSpawn(socket, refused)
          return
        }
        let request: ToNode
        try {
          request = decodeToNode(frame.header)
        } catch {
          socket.destroy()
          return
        }
        if (request._tag === "Renew") this.renew(socket, peer, request.clusterId)
        else this.spawn(socket, peer, request, reader.takeUnread())
      },
      undefined,
      0,
      MAX_NODE_REQUEST_BYTES,
    )
    const onData = (chunk: Buffer) => {
      try {
        reader.push(chunk)
      } catch {
        socket.destroy()
      }
    }
    socket.on("data", onData)
    socket.on("error", () => socket.destroy())
  }

  /** Admits the spawns of `driver` for the cluster `clusterId` (one driver per cluster id), and starts or renews its lease. */
  admit(clusterId: string, driver: string): HostInfo & { readonly protocol: number } {
    const admitted = this.drivers.get(clusterId)
    if (this.closed || (admitted !== undefined && admitted.driver !== driver)) {
      throw new InvalidArgumentError({ message: `node ${this.host.name} does not admit ${driver} for cluster ${clusterId}`, argument: "clusterId" })
    }
    if (admitted === undefined) this.drivers.set(clusterId, { driver, actors: new Map(), renewedAt: performance.now() })
    else admitted.renewedAt = performance.now()
    return { ...this.info(), protocol: PROTOCOL_VERSION }
  }

  /** Renews the lease of `driver` for `clusterId`, and tells it whether it still held one here. */
  private renew(socket: tls.TLSSocket, driver: string, clusterId: string): void {
    const admitted = this.drivers.get(clusterId)
    const held = admitted !== undefined && admitted.driver === driver
    if (held) admitted.renewedAt = performance.now()
    writeFrame(socket, { _tag: "LeaseRenewal", held } satisfies LeaseRenewal)
    finish(socket)
  }

  /**
   * Ends the actors of the driver of `clusterId` on this host, and their connections: a connection
   * only ended would stay open here as long as a driver cut off does not answer.
   */
  endDriver(clusterId: string): void {
    const admitted = this.drivers.get(clusterId)
    this.drivers.delete(clusterId)
    for (const [child, socket] of admitted?.actors ?? []) {
      child.kill("SIGKILL")
      socket.destroy()
    }
  }

  /**
   * Starts an actor for a driver admitted here, and joins its control connection (fd 3) to
   * the driver's connection byte for byte. A spawn that fails is told to the driver as the actor's
   * InitFailed.
   */
  private spawn(socket: tls.TLSSocket, driver: string, request: Extract<ToNode, { _tag: "Spawn" }>, unread: Buffer): void {
    const admitted = this.drivers.get(request.clusterId)
    const refuse = (error: unknown) => refuseSpawn(socket, error)
    if (admitted === undefined || admitted.driver !== driver) {
      refuse(new InvalidArgumentError({ message: `${driver} is not admitted by node ${this.host.name} for cluster ${request.clusterId}`, argument: "clusterId" }))
      return
    }
    const running = [...this.drivers.values()].reduce((n, d) => n + d.actors.size, 0)
    if (running >= this.maxActors) {
      refuse(
        new ActorLimitError({
          message: `host ${this.host.name} runs ${running} actors, its limit (maxActors ${this.maxActors}; set it per host in the cluster config): ${request.actorId} was not started`,
          host: this.host.name,
          limit: this.maxActors,
        }),
      )
      return
    }
    const env = {
      ...process.env,
      ...request.env,
      // The data planes of this host: gloo's pairs on its configured address, UCX's and NCCL's
      // sockets on its configured interface only.
      TENSORLANE_GLOO_HOST: this.host.address,
      UCX_NET_DEVICES: this.host.interface,
      NCCL_SOCKET_IFNAME: this.host.interface,
      [CLUSTER_CONFIG_VARIABLE]: this.config.file,
      [CLUSTER_MEMBER_VARIABLE]: this.host.name,
    }
    // A process that could not start (told after launchActor returned): the driver hears it as its actor's InitFailed.
    const failed = (error: Error) => {
      admitted.actors.delete(child)
      socket.unpipe(control)
      socket.off("close", end)
      refuse(new ActorDiedError({ message: `actor ${request.actorId} could not be started on host ${this.host.name}: ${error.message}`, actor: request.actorId }))
    }
    let launched: LaunchedActor
    try {
      launched = launchActor([...request.execArgv, ...actorTypeScriptFlags(request.moduleUrl, [])], env, failed)
    } catch (error) {
      refuse(error)
      return
    }
    const { child, control } = launched
    admitted.actors.set(child, socket)
    if (unread.byteLength > 0) control.write(unread)
    socket.pipe(control)
    control.pipe(socket)
    // Its driver's connection closed: the actor is killed, and no longer counts against maxActors.
    const end = () => {
      child.kill("SIGKILL")
      admitted.actors.delete(child)
    }
    socket.on("close", end)
    control.on("error", () => socket.destroy())
    child.once("exit", () => {
      admitted.actors.delete(child)
      socket.off("close", end)
      finish(socket)
    })
  }

  /** Stops listening and ends every actor this node started. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.leaseWatch)
    const children = [...this.drivers.values()].flatMap((s) => [...s.actors.keys()])
    for (const clusterId of [...this.drivers.keys()]) this.endDriver(clusterId)
    await settledWithin(
      children.map((c) => (c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((done) => c.once("exit", () => done())))),
      SHUTDOWN_GRACE_MS,
    )
    // A peer that never closes its side must not keep the server from closing.
    for (const socket of this.sockets) socket.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    await this.engine?.dispose()
  }
}

/** Starts a host's node in this process. */
export const startNode = (options: NodeOptions): Promise<TensorlaneNode> => TensorlaneNode.start(options)
