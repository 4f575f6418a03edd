/**
 * The transfer agent: a worker thread in every process (driver and actors) that owns the transports,
 * serves the objects its process produced and runs transfers, so that bytes keep moving while the
 * process's main JS thread is busy. The main thread talks to it by messages (`AgentCommand`); peers
 * and the driver talk to it over its Unix socket.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import { MissingGroupError, ObjectFreedError, ProtocolError, TransferError, UnsupportedOperationError } from "../Errors.js"
import type { Tensor } from "../Tensor.js"
import type { GroupSetup, ReduceOp, TensorTransport, TransportObject } from "../Transport.js"
import { Connection, connect } from "./connection.js"
import type { Frame } from "./frame.js"
import {
  type AgentReply,
  type AgentRequest,
  MAX_AGENT_REQUEST_BYTES,
  type ObjectInfo,
  type TensorMeta,
  decodeAgentReply,
  decodeAgentRequest,
} from "./messages.js"
import { metaMismatch, tensorMeta } from "./tensorMeta.js"
import { loadTransports, objectStoreName, unknownTransport } from "./transportRegistry.js"
import { type WireTensor, fromWireTensor } from "./wireTensor.js"
import { fromWireError, toWireError } from "./wireError.js"
import { PendingTransfers, transferLabel } from "./pendingTransfers.js"
import { pidExists, statFields } from "./processes.js"
import { BufferUse } from "./quarantine.js"
import { receiveLabel, receiveObject } from "./receiveObject.js"

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

export type AgentEvent = { readonly event: "groups"; readonly groups: ReadonlyArray<{ name: string; backend: string; rank: number; worldSize: number }> }

export interface AgentOptions {
  readonly processId: string
  readonly address: string
  readonly transports: ReadonlyArray<string>
  /** Actors end their own process when their parent is gone, even with a busy main thread. */
  readonly parentPid: number | undefined
  readonly emit: (event: AgentEvent) => void
  /** Runs the commands the main thread has posted and this thread has not taken in yet. */
  readonly takeQueuedCommands: () => void
}

/** What the main thread gives its agent when it starts it (the rest are the worker's own functions). */
export type AgentWorkerData = Omit<AgentOptions, "emit" | "takeQueuedCommands">

interface Held {
  readonly transport: TensorTransport
  readonly object: TransportObject
  readonly registeredHere: boolean
}

interface OutgoingRequest {
  readonly expected: ReadonlyArray<TensorMeta>
  /** Dropped once given up on before its body came: that memory is no longer this request's. */
  into: ReadonlyArray<Uint8Array>
  readonly resolve: () => void
  readonly reject: (error: Error) => void
  /** Given up on (timeout): its reply may still come, and is read into scratch memory of the expected size. */
  abandoned: boolean
  /** Its reply's body is being read into `into`. */
  readingInto: boolean
  /** `into` is no longer written: the reply was read, its connection closed, or it was given up on before its body came. */
  readonly ended: () => void
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
  private transports = new Map<string, TensorTransport>()
  private readonly held = new Map<string, Held>()
  private readonly groups = new Map<string, { setup: Omit<GroupSetup, "allGather">; backend: string }>()
  private readonly pending = new PendingTransfers()
  /** Sends asked for before their object was registered, by object: each resolver starts one. */
  private readonly awaitingRegistration = new Map<string, Set<() => void>>()
  private readonly outgoing = new Map<string, Promise<Connection>>()
  private readonly requests = new Map<number, OutgoingRequest>()
  private readonly gathers = new Map<string, { resolve: (blobs: ReadonlyArray<Uint8Array>) => void; reject: (error: Error) => void }>()
  /** Groups being created, and whether their owner destroyed them meanwhile (then they go once made). */
  private readonly creating = new Map<string, { abandoned: boolean }>()
  private readonly server = net.createServer((socket) => this.accept(socket))
  private readonly accepted = new Set<Connection>()
  private nextId = 1
  private lifeline: NodeJS.Timeout | undefined

  constructor(private readonly options: AgentOptions) {}

  async start(): Promise<void> {
    this.transports = await loadTransports(this.options.transports, {
      fetchFrom: (r) => this.fetchFrom(r.producerAddress, r.objectId, r.tensors, r.into, r.signal, r.writesUntil),
    })
    fs.rmSync(this.options.address, { force: true })
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject)
      this.server.listen(this.options.address, () => resolve())
    })
    const parentPid = this.options.parentPid
    if (parentPid !== undefined) {
      // A SIGKILLed driver closes no socket we could wait on while the main thread is busy: poll.
      this.lifeline = setInterval(() => {
        if (!parentAlive(parentPid)) process.kill(process.pid, "SIGKILL")
      }, 250)
      this.lifeline.unref()
    }
  }

  private transport(name: string): TensorTransport {
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
          groups: [...this.groups.keys()],
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

  /** Reads an object from another agent over the control plane: the object-store path. */
  private async fetchFrom(
    address: string,
    objectId: string,
    expected: ReadonlyArray<TensorMeta>,
    into: ReadonlyArray<Tensor>,
    signal: AbortSignal,
    writesUntil: ((done: Promise<unknown>) => void) | undefined,
  ): Promise<void> {
    const connection = await this.connection(address)
    const reqId = this.nextId++
    let ended!: () => void
    writesUntil?.(new Promise<void>((resolve) => (ended = resolve)))
    await new Promise<void>((resolve, reject) => {
      const request: OutgoingRequest = {
        expected,
        into: into.map((t) => t.storage.bytes.subarray(t.byteOffset, t.byteOffset + t.nbytes)),
        resolve: () => {
          signal.removeEventListener("abort", onAbort)
          resolve()
        },
        reject: (error) => {
          signal.removeEventListener("abort", onAbort)
          reject(error)
        },
        abandoned: false,
        readingInto: false,
        ended,
      }
      const onAbort = () => {
        request.abandoned = true
        if (!request.readingInto) {
          request.into = []
          ended()
        }
        reject(signal.reason)
      }
      signal.addEventListener("abort", onAbort, { once: true })
      this.requests.set(reqId, request)
      connection.send({ _tag: "Fetch", reqId, objectId } satisfies AgentRequest)
    })
  }

  private connection(address: string): Promise<Connection> {
    let connection = this.outgoing.get(address)
    if (connection === undefined) {
      connection = connect(address, {
        peerMaxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
        onFrame: (frame) => this.onReply(frame),
        bodyDestinations: (header) => {
          const reply = decodeAgentReply(header)
          if (reply._tag !== "Data") throw new ProtocolError({ message: `unexpected body on a ${reply._tag} reply` })
          const request = this.requests.get(reply.reqId)
          if (request === undefined) throw new ProtocolError({ message: `a body for request ${reply.reqId}, which was never made` })
          const mismatch = metaMismatch(request.expected, reply.tensors)
          if (mismatch !== undefined) throw new ProtocolError({ message: `a producer sent other tensors than its object describes: ${mismatch}` })
          // Bytes of a request given up on land in scratch memory (of the size asked for) to keep the stream in sync.
          if (request.abandoned) return request.expected.map((m) => new Uint8Array(m.nbytes))
          request.readingInto = true
          return request.into
        },
        onClose: (error) => {
          this.outgoing.delete(address)
          const failure = new TransferError({
            message: `connection to ${address} closed${error ? `: ${error.message}` : ""} (the producer died or misbehaved)`,
            transport: objectStoreName,
          })
          for (const [reqId, request] of this.requests) {
            this.requests.delete(reqId)
            request.ended()
            request.reject(failure)
          }
        },
      })
      connection.catch(() => this.outgoing.delete(address))
      this.outgoing.set(address, connection)
    }
    return connection
  }

  private onReply(frame: Frame): void {
    const reply = decodeAgentReply(frame.header)
    const request = this.requests.get(reply.reqId)
    if (request === undefined) return
    this.requests.delete(reply.reqId)
    request.ended()
    if (request.abandoned) return
    if (reply._tag === "Data") request.resolve()
    else if (reply._tag === "Failed") request.reject(fromWireError(reply.error, { actor: "agent", method: "fetch" }))
    else request.reject(new ProtocolError({ message: `unexpected ${reply._tag} reply to a fetch` }))
  }

  private accept(socket: net.Socket): void {
    const accepted = new Connection(socket, {
      // Requests to an agent are small and never carry a body.
      maxBodyBytes: 0,
      maxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
      onClose: (_error, connection) => this.accepted.delete(connection),
      onFrame: (frame, connection) => {
        let request: AgentRequest
        try {
          request = decodeAgentRequest(frame.header)
        } catch (error) {
          connection.close(error as Error)
          return
        }
        this.serve(request, connection).catch((error) =>
          connection.send({ _tag: "Failed", reqId: request.reqId, error: toWireError(error) } satisfies AgentReply),
        )
      },
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
          { _tag: "Data", reqId: request.reqId, tensors: tensors.map(tensorMeta) } satisfies AgentReply,
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
      case "GroupCreate": {
        const { setup } = request
        const transport = this.transport(setup.backend)
        const creation = { abandoned: false }
        this.creating.set(setup.name, creation)
        try {
          await transport.createGroup!({
            ...setup,
            allGather: (blob) =>
              new Promise((resolve, reject) => {
                this.gathers.set(setup.name, { resolve, reject })
                connection.send({ _tag: "Gather", reqId: request.reqId, group: setup.name, rank: setup.rank, blob } satisfies AgentReply)
              }),
          })
        } finally {
          this.creating.delete(setup.name)
        }
        // Destroyed while its transport was still connecting it (past the rendezvous): nobody else will.
        if (creation.abandoned) {
          await transport.destroyGroup?.(setup.name)
          throw new TransferError({ message: `creating group "${setup.name}" was abandoned`, transport: setup.backend })
        }
        this.groups.set(setup.name, { setup, backend: setup.backend })
        this.emitGroups()
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      }
      case "GroupDestroy": {
        // A creation still in its rendezvous ends: the owner gave up on it.
        this.gathers.get(request.name)?.reject(new TransferError({ message: `creating group "${request.name}" was abandoned`, transport: request.backend }))
        this.gathers.delete(request.name)
        const creation = this.creating.get(request.name)
        if (creation !== undefined) creation.abandoned = true
        const group = this.groups.get(request.name)
        this.groups.delete(request.name)
        this.emitGroups()
        if (group !== undefined) await this.transport(group.backend).destroyGroup?.(request.name)
        connection.send({ _tag: "Done", reqId: request.reqId } satisfies AgentReply)
        return
      }
      case "Gathered": {
        const gather = this.gathers.get(request.group)
        this.gathers.delete(request.group)
        gather?.resolve(request.blobs)
        return
      }
      case "PeerDied":
        this.pending.peerDied(request.peer)
        return
    }
  }

  private emitGroups(): void {
    this.options.emit({
      event: "groups",
      groups: [...this.groups.values()].map((g) => ({ name: g.setup.name, backend: g.backend, rank: g.setup.rank, worldSize: g.setup.worldSize })),
    })
  }

  private async close(): Promise<void> {
    clearInterval(this.lifeline)
    this.pending.abortAll("agent closing")
    for (const connection of this.outgoing.values()) connection.then((c) => c.close()).catch(() => undefined)
    for (const connection of this.accepted) connection.close()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
    for (const transport of this.transports.values()) await transport.close?.()
    fs.rmSync(this.options.address, { force: true })
  }
}
