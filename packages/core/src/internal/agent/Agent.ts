/**
 * The transfer agent: a worker thread in every process (driver and actors) that owns the transports,
 * serves the objects its process produced and runs transfers, so that bytes keep moving while the
 * process's main JS thread is busy. The main thread talks to it by messages (`AgentCommand`); peers
 * and the driver talk to it over its Unix socket.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import { loadClusterConfig, tlsOptionsFor } from "../../ClusterConfig.js"
import { MissingGroupError, ObjectFreedError, UnsupportedOperationError } from "../../Errors.js"
import type { PromiseTransport, ReduceOp, TransportObject } from "../../Transport.js"
import { Connection, decoded, tlsAddress, tlsEndpoint, tlsServer } from "../connection.js"
import { type AgentReply, type AgentRequest, MAX_AGENT_REQUEST_BYTES, type ObjectInfo, decodeAgentRequest } from "../messages.js"
import { PendingTransfers, transferLabel } from "../pendingTransfers.js"
import { pidExists, statFields } from "../processes.js"
import { BufferUse } from "../quarantine.js"
import { receiveLabel, receiveObject } from "../receiveObject.js"
import { type TensorMeta, writeMetas } from "../wireMetas.js"
import { loadTransports, promiseFaces, unknownTransport } from "../transportRegistry.js"
import { type WireTensor, fromWireTensor } from "../wireTensor.js"
import { settledWithin } from "../waits.js"
import { toWireError } from "../wireError.js"
import { type AgentEvent, Memberships } from "./Memberships.js"

export type AgentCommand =
  | {
      readonly op: "register"
      readonly objectId: string
      readonly transport: string
      readonly tensors: ReadonlyArray<WireTensor>
      /** The main thread did the transport's registration itself (and undoes it): the agent only serves the object. */
      readonly registeredByMain: boolean
    }
  | { readonly op: "release"; readonly objectIds: ReadonlyArray<string> }
  | {
      readonly op: "receive"
      readonly info: ObjectInfo
      /** What travels (see ReceiveObject). */
      readonly tensors: ReadonlyArray<TensorMeta>
      /** The transport to receive with: the object's own, or object-store for a copy through the control plane. */
      readonly via: string
      readonly into: ReadonlyArray<WireTensor>
      readonly consumer: string
      readonly timeoutMs: number
      /** Receive as a non-root member of a collective broadcast of the object to its whole group. */
      readonly collective: boolean
    }
  | {
      readonly op: "collective"
      readonly kind: "allreduce" | "broadcast"
      readonly group: string
      readonly tensors: ReadonlyArray<WireTensor>
      readonly reduce: ReduceOp
      readonly root: number
      readonly timeoutMs: number
    }
  | { readonly op: "inspect" }
  | { readonly op: "close" }

/** A member of a cluster across hosts: its config file and its name there (a host, or a driver). */
export interface ClusterMember {
  readonly config: string
  readonly member: string
  /** A driver's address toward the hosts (the config gives none): where its agent serves its puts. */
  readonly address?: string
}

export interface AgentOptions {
  readonly processId: string
  /** Where it listens: a Unix socket path; on a host of a cluster across hosts, that host's address under mutual TLS. */
  readonly address: string
  /** Set on a host of a cluster across hosts: the agent listens on the host's address under mutual TLS. */
  readonly cluster?: ClusterMember
  readonly transports: ReadonlyArray<string>
  /** Actors end their own process when their parent is gone, even with a busy main thread. */
  readonly parentPid: number | undefined
  readonly emit: (event: AgentEvent) => void
  /** Runs the commands the main thread has posted and this thread has not taken in yet. */
  readonly takeQueuedCommands: () => void
}

/** The longest a closing agent waits for its transports' prepare (the driver gives a process 2 s to shut down). */
const PREPARE_WAIT_MS = 1000

/** What the main thread gives its agent when it starts it (the rest are the worker's own functions). */
export type AgentStartOptions = Omit<AgentOptions, "emit" | "takeQueuedCommands">

interface Held {
  readonly transport: PromiseTransport
  readonly object: TransportObject
  readonly registeredHere: boolean
}

/**
 * Whether the process that started this one is still its parent. `process.ppid` is fixed at start in
 * worker threads, so Linux's /proc tells; elsewhere, whether that pid still exists.
 */
const parentAlive = (parentPid: number): boolean => {
  const fields = statFields("self")
  return fields !== undefined ? Number(fields[1]) === parentPid : pidExists(parentPid)
}

export class Agent {
  /** What this thread calls for each transport: its Promise face (`promiseFace`). */
  private transports = new Map<string, PromiseTransport>()
  private readonly held = new Map<string, Held>()
  private readonly groups: Memberships
  private readonly pending = new PendingTransfers()
  /** Sends asked for before their object was registered, by object: each resolver starts one. */
  private readonly awaitingRegistration = new Map<string, Set<() => void>>()
  private server: net.Server = net.createServer((socket) => this.accept(socket))
  /** Where it listens, once started. */
  address = ""
  private readonly accepted = new Set<Connection>()
  private lifeline: NodeJS.Timeout | undefined
  /** The transports' prepare (actors only), which close waits for. */
  private preparing: Promise<void> = Promise.resolve()
  private closing = false

  constructor(private readonly options: AgentOptions) {
    this.groups = new Memberships((name) => this.transport(name), options.emit)
  }

  async start(): Promise<void> {
    this.transports = promiseFaces(
      await loadTransports(this.options.transports, {
        fetchFrom: () => Promise.reject(new UnsupportedOperationError({ message: "object-store fetches run on the thread that needs the object" })),
      }),
    )
    const cluster = this.options.cluster
    const config = cluster === undefined ? undefined : loadClusterConfig(cluster.config)
    const credentials = config === undefined ? undefined : tlsOptionsFor(config, cluster!.member)
    const listenOn = config?.hosts.find((h) => h.name === cluster!.member)?.address ?? cluster?.address
    if (credentials === undefined || listenOn === undefined) {
      fs.rmSync(this.options.address, { force: true })
      await this.listen(this.options.address)
      this.address = this.options.address
    } else {
      this.server = tlsServer(credentials.server, (socket) => {
        // The handshake checked the peer's certificate against the cluster's CA; it must also name a member.
        try {
          credentials.peerName(socket)
        } catch {
          socket.destroy()
          return
        }
        this.accept(socket)
      })
      await this.listen({ host: listenOn, port: 0 })
      this.address = tlsAddress({ member: credentials.identity, host: listenOn, port: (this.server.address() as net.AddressInfo).port })
    }
    const parentPid = this.options.parentPid
    if (parentPid !== undefined) {
      // A SIGKILLed driver closes no socket we could wait on while the main thread is busy: poll.
      this.lifeline = setInterval(() => {
        if (!parentAlive(parentPid)) process.kill(process.pid, "SIGKILL")
      }, 250)
      this.lifeline.unref()
      // Once the actor's start has been reported: a library loaded here is one its first call does not wait for.
      this.preparing = new Promise((resolve) => setImmediate(() => resolve(this.prepareTransports())))
    }
  }

  /**
   * Each transport's one-time setup, one after another, none once the agent closes; whatever fails
   * there fails again, with its context, in a transfer.
   */
  private async prepareTransports(): Promise<void> {
    for (const transport of this.transports.values()) {
      if (this.closing) return
      try {
        await transport.prepare?.()
      } catch {
        continue
      }
    }
  }

  private listen(where: string | net.ListenOptions): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.server.once("error", reject)
      this.server.listen(where, () => resolve())
    })
  }

  private transport(name: string): PromiseTransport {
    const transport = this.transports.get(name)
    if (transport === undefined) throw unknownTransport(name, this.transports.keys())
    return transport
  }

  /** Commands from the main thread of this process; `uses` hears of the transport call of a receive or collective. */
  async command(command: AgentCommand, uses: (use: BufferUse) => void = () => undefined): Promise<unknown> {
    switch (command.op) {
      case "register": {
        const transport = this.transport(command.transport)
        const object: TransportObject = { objectId: command.objectId, tensors: command.tensors.map(fromWireTensor) }
        // Held before any await: heldObject() relies on a queued registration taking effect at once.
        if (command.registeredByMain) {
          this.hold(command.objectId, { transport, object, registeredHere: false })
          return undefined
        }
        const metadata = await transport.extractMetadata?.(object)
        this.hold(command.objectId, { transport, object, registeredHere: true })
        return metadata
      }
      case "release": {
        for (const objectId of command.objectIds) {
          const held = this.held.get(objectId)
          if (held === undefined) continue
          this.held.delete(objectId)
          if (held.registeredHere) await held.transport.release?.(held.object)
        }
        return undefined
      }
      case "receive":
        return this.receive(command, uses)
      case "collective":
        return this.collective(command, uses)
      case "inspect":
        return {
          pendingTransfers: this.pending.labels(),
          // Those of transports that work on any thread are process-wide: the main thread reports them.
          registrations: [...this.transports.values()].filter((t) => !t.capabilities.anyThread).flatMap((t) => t.inspect?.().registrations ?? []),
          groups: this.groups.names(),
          held: [...this.held.keys()],
        }
      case "close":
        return this.close()
    }
  }

  /** Holds a registered object and starts the sends that were waiting for it. */
  private hold(objectId: string, held: Held): void {
    this.held.set(objectId, held)
    const waiting = this.awaitingRegistration.get(objectId)
    this.awaitingRegistration.delete(objectId)
    for (const resolve of waiting ?? []) resolve()
  }

  private receive(command: Extract<AgentCommand, { op: "receive" }>, uses: (use: BufferUse) => void): Promise<void> {
    const into = command.into.map(fromWireTensor)
    const request = { ...command, into, hasGroup: (group: string) => this.groups.has(group) }
    const transport = this.transport(command.via)
    const use = new BufferUse(transport)
    uses(use)
    return this.pending.track(receiveLabel(command), command.info.producer, command.timeoutMs, (signal) =>
      use.run((writesUntil) => receiveObject(transport, { ...request, writesUntil }, signal)),
    )
  }

  private collective(command: Extract<AgentCommand, { op: "collective" }>, uses: (use: BufferUse) => void): Promise<void> {
    const group = this.groups.get(command.group)
    if (group === undefined) {
      return Promise.reject(new MissingGroupError({ message: `${this.options.processId} is in no group named "${command.group}"`, backend: "" }))
    }
    const transport = this.transport(group.backend)
    const run = command.kind === "allreduce" ? transport.allreduce : transport.broadcast
    if (run === undefined) {
      return Promise.reject(new UnsupportedOperationError({ message: `transport "${group.backend}" has no ${command.kind}` }))
    }
    const tensors = command.tensors.map(fromWireTensor)
    const label = `${group.backend} ${command.kind} in ${command.group}`
    const use = new BufferUse(transport)
    uses(use)
    return this.pending.track(label, "", command.timeoutMs, (signal) =>
      use.run((writesUntil) =>
        command.kind === "allreduce"
          ? transport.allreduce!({ group: command.group, tensors, op: command.reduce, signal, writesUntil })
          : transport.broadcast!({ group: command.group, tensors, root: command.root, signal, writesUntil }),
      ),
    )
  }

  private accept(socket: net.Socket): void {
    const accepted = new Connection(socket, {
      // Requests to an agent are small and never carry a body.
      maxBodyBytes: 0,
      maxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
      onClose: (_error, connection) => {
        this.accepted.delete(connection)
        this.groups.connectionClosed(connection)
        // The sends it asked for that still wait for their object would wait for good.
        this.pending.endWaiting(connection, "the connection that asked for it closed")
      },
      onFrame: decoded(decodeAgentRequest, (request, _frame, connection) => {
        this.serve(request, connection).catch((error) =>
          connection.send({ _tag: "Failed", reqId: request.reqId, error: toWireError(error) } satisfies AgentReply),
        )
      }),
    })
    this.accepted.add(accepted)
  }

  /**
   * An object this process produced. The main thread posts the registrations it made itself and goes
   * on without waiting, so a request for the object (sent by the owner after it heard of the object,
   * hence after the post) may overtake it: take in what is queued, then look again.
   */
  private heldObject(objectId: string): Held | undefined {
    if (!this.held.has(objectId)) this.options.takeQueuedCommands()
    return this.held.get(objectId)
  }

  /**
   * Resolves `done` once the main thread registers `objectId` (a send asked for before its object
   * existed); `stop` forgets the wait.
   */
  private registration(objectId: string): { done: Promise<void>; stop: () => void } {
    let resolve!: () => void
    const done = new Promise<void>((r) => (resolve = r))
    const waiting = this.awaitingRegistration.get(objectId) ?? new Set<() => void>()
    waiting.add(resolve)
    this.awaitingRegistration.set(objectId, waiting)
    const stop = () => {
      waiting.delete(resolve)
      if (waiting.size === 0 && this.awaitingRegistration.get(objectId) === waiting) this.awaitingRegistration.delete(objectId)
    }
    return { done, stop }
  }

  private sendLabel(request: { transport: string; objectId: string; to: string }): string {
    return transferLabel(request.transport, request.objectId, this.options.processId, request.to)
  }

  private async serve(request: AgentRequest, connection: Connection): Promise<void> {
    switch (request._tag) {
      case "Fetch": {
        const held = this.heldObject(request.objectId)
        if (held === undefined) {
          throw new ObjectFreedError({
            message: `object ${request.objectId} is not held by ${this.options.processId} (freed, or never produced here)`,
            objectId: request.objectId,
          })
        }
        const tensors = held.object.tensors
        connection.send(
          { _tag: "Data", reqId: request.reqId, tensors: writeMetas(tensors) } satisfies AgentReply,
          tensors.map((t) => t.contiguousBytes()),
        )
        return
      }
      case "Send": {
        const notHeld = () =>
          new ObjectFreedError({ message: `object ${request.objectId} is not held by ${this.options.processId}`, objectId: request.objectId })
        const held = this.heldObject(request.objectId)
        if (held === undefined && !request.whenRegistered) throw notHeld()
        const registered = held === undefined ? this.registration(request.objectId) : undefined
        try {
          if (!this.groups.has(request.group)) {
            throw new MissingGroupError({ message: `${this.options.processId} is not in group "${request.group}"`, backend: request.transport })
          }
          const transport = this.transport(request.transport)
          // Listed (and ended by a cancel or the consumer's death) while it waits for its object.
          await this.pending.track(
            this.sendLabel(request),
            request.to,
            request.timeoutMs,
            async (signal) => {
              // Registered by now, unless released meanwhile.
              const current = this.held.get(request.objectId)
              if (current === undefined) throw notHeld()
              return transport.send!({ object: current.object, group: request.group, toRank: request.toRank, signal })
            },
            registered?.done,
            connection,
          )
        } finally {
          registered?.stop()
        }
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      }
      case "CancelSend":
        this.pending.cancel(this.sendLabel(request), "its owner no longer needs it")
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      case "Broadcast": {
        const held = this.heldObject(request.objectId)
        if (held === undefined) {
          throw new ObjectFreedError({ message: `object ${request.objectId} is not held by ${this.options.processId}`, objectId: request.objectId })
        }
        const group = this.groups.get(request.group)
        if (group === undefined || held.transport.broadcast === undefined) {
          throw new MissingGroupError({ message: `${this.options.processId} cannot broadcast in group "${request.group}"`, backend: held.transport.name })
        }
        const label = `${held.transport.name} broadcast ${request.objectId} from ${this.options.processId}`
        // The root's tensors are sent in place: a strided view travels as a contiguous copy.
        const tensors = held.object.tensors.map((t) => t.contiguous())
        await this.pending.track(label, "", request.timeoutMs, (signal) =>
          held.transport.broadcast!({ group: request.group, tensors, root: request.root, signal }),
        )
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      }
      case "GroupCreate":
        await this.groups.create(request.setup, connection)
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      case "GroupDestroy":
        await this.groups.destroy(request.name)
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      case "AllGathered":
        this.groups.gathered(request, connection)
        return
      case "PeerDied":
        this.pending.peerDied(request.peer)
        return
    }
  }

  private async close(): Promise<void> {
    this.closing = true
    clearInterval(this.lifeline)
    this.pending.abortAll("agent closing")
    for (const connection of this.accepted) connection.close()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    // What a prepare under way sets up is there to close; one that does not end is waited for only
    // so long, within the time the driver gives a process to shut down.
    await settledWithin([this.preparing], PREPARE_WAIT_MS)
    for (const transport of this.transports.values()) await transport.close?.()
    if (tlsEndpoint(this.address) === undefined) fs.rmSync(this.options.address, { force: true })
  }
}
