/**
 * A host's node (`tensorlane node --config cluster.json --name h2`): the long-running process of a
 * host of a cluster across hosts. It listens on the host's configured address under mutual TLS and
 * starts, for the drivers of the cluster, the actor processes they place on its host: the same
 * actor code as on one machine, with the host's address for the data planes (gloo's pairs, UCX's
 * interface) and the host's credentials for their transfer agents. It owns them: they are its
 * children, and it ends a driver's actors once that driver's session is over (closed, or silent for
 * SILENCE_LIMIT_MS).
 */
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import type * as net from "node:net"
import * as os from "node:os"
import * as tls from "node:tls"
import { type ClusterConfig, type ClusterHost, type ClusterTls, loadClusterConfig, tlsOptionsFor } from "./ClusterConfig.js"
import { InvalidArgumentError, ProtocolError } from "./Errors.js"
import { launchActor } from "./internal/actorLaunch.js"
import { Connection, decoded } from "./internal/connection.js"
import { FrameReader, writeFrame } from "./internal/frame.js"
import { type FromActor, type FromNode, type HostInfo, MAX_NODE_REQUEST_BYTES, type ToNode, decodeToNode } from "./internal/messages.js"
import { watchSilence } from "./internal/node/liveness.js"
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

/** How long a connection to a node has for its TLS handshake, and then for its first message. */
const FIRST_MESSAGE_TIMEOUT_MS = 10_000

/** A driver's actors on this host, and its session. */
interface DriverSession {
  readonly driver: string
  readonly actors: Set<ChildProcess>
  readonly end: () => void
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

export class TensorlaneNode {
  private readonly sessions = new Map<string, DriverSession>()
  private readonly server: tls.Server
  private closed = false

  private constructor(
    readonly host: ClusterHost,
    private readonly config: ClusterConfig,
    private readonly credentials: ClusterTls,
  ) {
    this.server = tls.createServer({ ...credentials.server, handshakeTimeout: FIRST_MESSAGE_TIMEOUT_MS }, (socket) => this.accept(socket))
    // A handshake that fails (no certificate, another CA's) only ends that connection.
    this.server.on("tlsClientError", () => undefined)
  }

  /** Loads the config and the host's credentials, and listens on the host's address and port. */
  static async start(options: NodeOptions): Promise<TensorlaneNode> {
    const config = loadClusterConfig(options.config)
    const host = config.hosts.find((h) => h.name === options.name)
    if (host === undefined) {
      throw new InvalidArgumentError({ message: `${options.name} is not a host of ${config.file} (its hosts: ${config.hosts.map((h) => h.name).join(", ")})`, argument: "name" })
    }
    const node = new TensorlaneNode(host, config, tlsOptionsFor(config, host.name))
    await new Promise<void>((resolve, reject) => {
      node.server.once("error", reject)
      node.server.listen({ host: host.address, port: host.port }, () => resolve())
    })
    return node
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
    // A connection says what it is for at once, or is dropped: none is kept open for nothing.
    socket.setTimeout(FIRST_MESSAGE_TIMEOUT_MS, () => socket.destroy())
    const reader = new FrameReader(
      (frame) => {
        socket.setTimeout(0)
        socket.off("data", onData)
        let request: ToNode
        try {
          request = decodeToNode(frame.header)
        } catch {
          socket.destroy()
          return
        }
        if (request._tag === "Session") this.session(socket, peer, request.clusterId, reader.takeUnread())
        else if (request._tag === "Spawn") this.spawn(socket, peer, request, reader.takeUnread())
        else socket.destroy()
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

  /** A driver's session: pings answered; its end (closed, or silent) ends the driver's actors here. */
  private session(socket: tls.TLSSocket, driver: string, clusterId: string, unread: Buffer): void {
    const previous = this.sessions.get(clusterId)
    if (this.closed || (previous !== undefined && previous.driver !== driver)) {
      socket.destroy()
      return
    }
    // A driver opens a session again only once it took its previous one for over (its actors here
    // for dead), which this end may not have noticed yet.
    previous?.end()
    const actors = new Set<ChildProcess>()
    const end = () => {
      if (this.sessions.get(clusterId)?.actors !== actors) return
      this.sessions.delete(clusterId)
      watch.stop()
      connection.close()
      for (const child of actors) child.kill("SIGKILL")
    }
    const watch = watchSilence(end)
    const connection = new Connection(socket, {
      maxBodyBytes: 0,
      maxHeaderBytes: MAX_NODE_REQUEST_BYTES,
      onFrame: decoded(decodeToNode, (message) => {
        watch.heard()
        if (message._tag === "Ping") connection.send({ _tag: "Pong" } satisfies FromNode)
        else connection.close(new ProtocolError({ message: `${message._tag} on a session` }))
      }),
      onClose: end,
    })
    this.sessions.set(clusterId, { driver, actors, end })
    connection.send({ _tag: "SessionOpened", info: this.info() } satisfies FromNode)
    if (unread.byteLength > 0) socket.emit("data", unread)
  }

  /**
   * Starts an actor for a driver that has a session here, and joins its control connection (fd 3) to
   * the driver's connection byte for byte. A spawn that fails is told to the driver as the actor's
   * InitFailed.
   */
  private spawn(socket: tls.TLSSocket, driver: string, request: Extract<ToNode, { _tag: "Spawn" }>, unread: Buffer): void {
    const session = this.sessions.get(request.clusterId)
    const refuse = (error: unknown) => {
      writeFrame(socket, { _tag: "InitFailed", error: toWireError(error) } satisfies FromActor)
      socket.end()
    }
    if (session === undefined || session.driver !== driver) {
      refuse(new InvalidArgumentError({ message: `${driver} has no session with node ${this.host.name} for cluster ${request.clusterId}`, argument: "clusterId" }))
      return
    }
    let child: ChildProcess
    try {
      child = launchActor([...request.execArgv, ...actorTypeScriptFlags(request.moduleUrl, [])], {
        ...process.env,
        ...request.env,
        // The data planes of this host: gloo's pairs on its configured address, UCX's and NCCL's
        // sockets on its configured interface only.
        TENSORLANE_GLOO_HOST: this.host.address,
        UCX_NET_DEVICES: this.host.interface,
        NCCL_SOCKET_IFNAME: this.host.interface,
        [CLUSTER_CONFIG_VARIABLE]: this.config.file,
        [CLUSTER_MEMBER_VARIABLE]: this.host.name,
      })
    } catch (error) {
      refuse(error)
      return
    }
    session.actors.add(child)
    const control = child.stdio[3] as net.Socket
    if (unread.byteLength > 0) control.write(unread)
    socket.pipe(control)
    control.pipe(socket)
    const end = () => child.kill("SIGKILL")
    socket.on("close", end)
    control.on("error", () => socket.destroy())
    child.once("exit", () => {
      session.actors.delete(child)
      socket.off("close", end)
      socket.end()
    })
  }

  /** Stops listening and ends every actor this node started. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    const children = [...this.sessions.values()].flatMap((s) => [...s.actors])
    for (const s of [...this.sessions.values()]) s.end()
    await settledWithin(
      children.map((c) => (c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((done) => c.once("exit", () => done())))),
      SHUTDOWN_GRACE_MS,
    )
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** Starts a host's node in this process. */
export const startNode = (options: NodeOptions): Promise<TensorlaneNode> => TensorlaneNode.start(options)
