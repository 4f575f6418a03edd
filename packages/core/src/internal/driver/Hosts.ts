/**
 * The driver's side of a cluster across hosts: a session with the node of each host it uses (pinged;
 * its end fails that host's actors), the placement of a spawn call's actors on hosts, and the start
 * of an actor through its host's node.
 */
import type { ClusterConfig, ClusterHost, ClusterTls } from "../../ClusterConfig.js"
import { InvalidArgumentError, TimeoutError, TransferError } from "../../Errors.js"
import { describe } from "../arguments.js"
import { type Connection, connect, decoded, openSocket, tlsAddress } from "../connection.js"
import { writeFrame } from "../frame.js"
import { type FromNode, type HostInfo, MAX_NODE_REQUEST_BYTES, type ToNode, decodeFromNode } from "../messages.js"
import { PING_INTERVAL_MS, SILENCE_LIMIT_MS, watchSilence } from "../node/liveness.js"
import { firstFailure } from "../waits.js"
import type { ActorProcess, ProcessLauncher, SpawnOptions } from "./ActorProcesses.js"

/** How long a node has to answer a session's opening: a node that does not is taken for down. */
const SESSION_OPEN_TIMEOUT_MS = 5_000

interface Session {
  readonly info: HostInfo
  readonly connection: Connection
}

const nodeAddress = (host: ClusterHost): string => tlsAddress({ member: host.name, host: host.address, port: host.port })

export class Hosts {
  private readonly sessions = new Map<string, Promise<Session>>()

  constructor(
    private readonly config: ClusterConfig,
    private readonly credentials: ClusterTls,
    private readonly clusterId: string,
    private readonly execArgv: ReadonlyArray<string>,
    /** A host's session ended (its node died, or was cut off): its actors are gone. */
    private readonly lost: (host: string, reason: string) => void,
  ) {}

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

  /** The session with a host's node, opened on first use (and again after one that ended). */
  private session(host: ClusterHost): Promise<Session> {
    let session = this.sessions.get(host.name)
    if (session === undefined) {
      session = this.open(host)
      const opened = session
      opened.catch(() => {
        if (this.sessions.get(host.name) === opened) this.sessions.delete(host.name)
      })
      this.sessions.set(host.name, session)
    }
    return session
  }

  /**
   * Opens a session: connects, says which cluster it is for, and waits for the node's answer, all
   * within SESSION_OPEN_TIMEOUT_MS (a host cut off would leave a TCP connect waiting for minutes).
   * Then pings it; its end (closed, or silent) tells `lost`.
   */
  private async open(host: ClusterHost): Promise<Session> {
    let answered!: (info: HostInfo) => void
    let ended!: (error: Error) => void
    const info = new Promise<HostInfo>((resolve) => (answered = resolve))
    const closed = new Promise<never>((_, reject) => (ended = reject))
    let silence: { readonly heard: () => void; readonly stop: () => void } | undefined
    let pinger: NodeJS.Timeout | undefined
    let established = false
    const connecting = connect(
      nodeAddress(host),
      {
        maxBodyBytes: 0,
        peerMaxHeaderBytes: MAX_NODE_REQUEST_BYTES,
        onFrame: decoded(decodeFromNode, (message: FromNode) => {
          silence?.heard()
          if (message._tag === "SessionOpened") answered(message.info)
        }),
        onClose: (error) => {
          const reason = error?.message ?? "its connection closed"
          clearInterval(pinger)
          silence?.stop()
          ended(new TransferError({ message: `host ${host.name}'s node at ${host.address}:${host.port} ended the session: ${reason}`, transport: "control" }))
          // One that never opened has no actors, and its failure is its opening's; another may be open now.
          if (established) {
            this.sessions.delete(host.name)
            this.lost(host.name, reason)
          }
        },
      },
      this.credentials.client,
    )
    // Raced only while the session opens; its end afterwards is told to `lost`.
    closed.catch(() => undefined)
    let gaveUp = false
    const opening = connecting.then(async (connection) => {
      // A connection made after this opening gave up must not open a session: a later one may be open.
      if (gaveUp) throw new TransferError({ message: `host ${host.name}'s node was reached too late`, transport: "control" })
      connection.send({ _tag: "Session", clusterId: this.clusterId } satisfies ToNode)
      return { info: await Promise.race([info, closed]), connection }
    })
    const timedOut = () =>
      new TimeoutError({
        message: `host ${host.name}'s node at ${host.address}:${host.port} did not answer within ${SESSION_OPEN_TIMEOUT_MS} ms`,
        timeoutMs: SESSION_OPEN_TIMEOUT_MS,
      })
    const failure = await firstFailure([opening], SESSION_OPEN_TIMEOUT_MS, timedOut)
    if (failure !== undefined) {
      gaveUp = true
      connecting.then((c) => c.close(), () => undefined)
      throw failure
    }
    const session = await opening
    established = true
    silence = watchSilence(() => session.connection.close(new Error(`no answer from its node for ${SILENCE_LIMIT_MS} ms`)))
    pinger = setInterval(() => session.connection.send({ _tag: "Ping" } satisfies ToNode), PING_INTERVAL_MS)
    pinger.unref()
    return session
  }

  /** The hosts whose nodes answer, in the config's order, with what their nodes report. */
  async list(): Promise<Array<HostInfo>> {
    const answers = await Promise.allSettled(this.config.hosts.map((h) => this.session(h)))
    return answers.flatMap((a) => (a.status === "fulfilled" ? [a.value.info] : []))
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
    await Promise.all([...new Set(names)].map((n) => this.session(this.host(n, "hosts"))))
    return Array.from({ length: count }, (_, i) => names[i % names.length]!)
  }

  /** Starts an actor through its host's node: the connection carries its Spawn, then its control connection. */
  readonly launcher: ProcessLauncher = ({ id, definition, env, host }) => {
    const { socket } = openSocket(nodeAddress(this.host(host, "host")), this.credentials.client)
    socket.setNoDelay(true)
    writeFrame(socket, {
      _tag: "Spawn",
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

  /** Ends every session: the nodes end this driver's actors. */
  close(): void {
    const sessions = [...this.sessions.values()]
    this.sessions.clear()
    for (const s of sessions) s.then((session) => session.connection.close()).catch(() => undefined)
  }
}
