/**
 * The driver's actor processes: starting them (the processes of one spawn call start together, within
 * one time limit), their handles, the control connection to each and the requests the driver makes
 * over it, and their end (an exit, a closed connection, `cluster.kill`, shutdown).
 */
import { EventEmitter } from "node:events"
import type { Socket } from "node:net"
import { type ActorDefinition, type ActorHandle, type CallOptions, isActorDefinition, methodOf } from "../../Actor.js"
import { ActorDiedError, ClusterClosedError, CrossHostError, InvalidArgumentError, ProtocolError, TimeoutError } from "../../Errors.js"
import { type ClusterIdentity, type ObjectRef, requireSameCluster } from "../../ObjectRef.js"
import { launchActor } from "../actorLaunch.js"
import { checkOptions, checkTimeout, describe } from "../arguments.js"
import { Connection, decoded } from "../connection.js"
import { type ActorInspection, type FromActor, type ToActor, decodeFromActor } from "../messages.js"
import type { Entry } from "../objectDirectory.js"
import { MAX_VALUE_BYTES } from "../frame.js"
import { SHUTDOWN_GRACE_MS, checkDescribed } from "../processRuntime.js"
import { actorTypeScriptFlags } from "../typeScript.js"
import { Requests } from "../requests.js"
import { firstFailure, settledWithin } from "../waits.js"
import { fromWireError } from "../wireError.js"
import type { DriverContext } from "./DriverContext.js"

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
  /** The host to start every actor of this call on (a cluster started with a `cluster` config only). */
  readonly host?: string
  /**
   * Hosts to spread the actors of this call over, actor i on `hosts[i % hosts.length]` (a cluster
   * started with a `cluster` config only). Without `host` or `hosts`, the actors are spread so over
   * every host of the config, in its order.
   */
  readonly hosts?: ReadonlyArray<string>
}

/** An actor's process as the driver sees it: a child of the driver, or one a host's node started. */
export interface ActorProcess {
  /** The driver's end of the actor's control connection. */
  readonly control: Socket
  /** The host it runs on; undefined for a child of the driver. */
  readonly host: string | undefined
  /** Ends it at once (SIGKILL; on a host, its node kills it when its control connection closes). */
  readonly kill: () => void
  /** Whether it is known to have ended. */
  readonly ended: () => boolean
  /** Calls `listener` once it ended, with how (its exit status where known), as words that follow "died". */
  readonly onExit: (listener: (how: string) => void) => void
}

/** Starts the process of one actor; `flags` are the Node.js flags it takes on this machine. */
export type ProcessLauncher = (start: {
  readonly id: string
  readonly definition: ActorDefinition
  readonly flags: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly host: string | undefined
}) => ActorProcess

/** Starts actors as children of this process. */
export const localLauncher: ProcessLauncher = ({ flags, env }) => {
  // A process that could not start never exits: its failure ends it.
  const ends = new EventEmitter<{ end: [how: string] }>()
  const { child, control } = launchActor(flags, { ...process.env, ...env }, (error) => ends.emit("end", `: its process could not be started (${error.message})`))
  child.once("exit", (code, signal) => ends.emit("end", ` (exit code ${code}, signal ${signal})`))
  return {
    control,
    host: undefined,
    kill: () => child.kill("SIGKILL"),
    // A process that could not start has a negative exit code.
    ended: () => child.exitCode !== null || child.signalCode !== null,
    onExit: (listener) => ends.once("end", listener),
  }
}

/**
 * Loading native transports and an `init` that loads data take a while, and many actors starting at
 * once on a loaded machine longer still; a minute leaves room for that and still reports an `init`
 * that hangs.
 */
const DEFAULT_START_TIMEOUT_MS = 60_000
/**
 * Every actor is a process of its own, of tens of MiB before it holds any tensor. One call that asks
 * for more than this is far likelier a wrong number (a size, an index) than a plan, and would leave
 * the driver starting processes for a long time; several calls start more.
 */
const MAX_SPAWN_COUNT = 256
/** How long a closed control socket waits for the process exit status that explains it. */
const EXIT_STATUS_WAIT_MS = 250

/** A call sent to an actor and not answered yet. */
export interface InFlightCall {
  readonly entry: Entry
  readonly method: string
  /** Its arguments' objects, held until it is answered. */
  readonly pinned: ReadonlyArray<string>
}

export interface ActorRecord {
  readonly id: string
  readonly definition: ActorDefinition
  readonly process: ActorProcess
  readonly control: Connection
  agentAddress: string
  alive: boolean
  /** Calls are dispatched to an actor in submission order: each waits for the previous one to be sent. */
  dispatched: Promise<void>
  /** Calls submitted and not yet sent (nor failed). */
  undispatched: number
  readonly inFlight: Map<number, InFlightCall>
  /** Its methods whose last result travelled whole in its info: no send is asked for early of what they make. */
  readonly wholeResults: Set<string>
  readonly exited: Promise<void>
}

/** The replies to the driver's requests over a control connection. */
type ControlReply = Extract<FromActor, { _tag: "Prefetched" | "Inspection" }>

/** The messages of a started actor that other modules act on: all but the replies to this module's requests, and those of its start. */
export type ActorMessage = Exclude<FromActor, ControlReply | { readonly _tag: "Ready" | "InitFailed" }>

/** What every actor process starts with. */
export interface Launch {
  /** The cluster directory, where every process's agent listens. */
  readonly dir: string
  /** Transport specifiers every actor loads. */
  readonly transports: ReadonlyArray<string>
  /** Extra Node.js flags. */
  readonly execArgv: ReadonlyArray<string>
}

export interface ProcessEvents {
  readonly message: (record: ActorRecord, message: ActorMessage) => void
  /** An actor died (once per actor): what it took part in fails with `died`. */
  readonly died: (record: ActorRecord, died: ActorDiedError) => void
}

/** Where an actor handle keeps the cluster that made it (a symbol: not one of the actor's method names). */
const handleCluster = Symbol("tensorlane.handleCluster")

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

/** Extra environment variables: names without "=" and values, all strings without NUL characters. */
const checkEnv = (env: unknown): Readonly<Record<string, string>> => {
  if (env === undefined) return {}
  const refuse = (what: string) => new InvalidArgumentError({ message: `env must map names to strings: ${what}`, argument: "env" })
  if (typeof env !== "object" || env === null || Array.isArray(env)) throw refuse(`got ${describe(env)}`)
  for (const [name, value] of Object.entries(env)) {
    if (name === "" || name.includes("=") || name.includes("\0")) throw refuse(`the name ${describe(name)} is empty or has "=" or a NUL character`)
    if (typeof value !== "string") throw refuse(`${name} is ${describe(value)}`)
    if (value.includes("\0")) throw refuse(`the value of ${name} has a NUL character`)
  }
  return env as Readonly<Record<string, string>>
}

/** Where an actor runs, as words that follow its id: "" on the driver's machine. */
const onHost = (host: string | undefined): string => (host === undefined ? "" : ` on host ${host}`)

/** The error of a request to an actor already dead. */
export const dead = (record: ActorRecord): ActorDiedError =>
  new ActorDiedError({ message: `actor ${record.id}${onHost(record.process.host)} is dead`, actor: record.id })

const closedWhileStarting = (records: ReadonlyArray<{ readonly id: string }>): ClusterClosedError =>
  new ClusterClosedError({ message: `the cluster was shut down before ${records.map((r) => r.id).join(", ")} had started` })

export class ActorProcesses {
  private readonly actors = new Map<string, ActorRecord>()
  /** Actors of spawn calls that have not returned: shutdown ends them too. */
  private readonly starting = new Set<ActorRecord>()
  private readonly nextActor = new Map<string, number>()
  private readonly requests = new Requests<ControlReply>()

  constructor(
    private readonly driver: DriverContext,
    private readonly launch: Launch,
    private readonly events: ProcessEvents,
    private readonly launcher: ProcessLauncher,
    /** The host of each actor of a spawn call (undefined: this machine); throws for a placement it refuses. */
    private readonly place: (options: SpawnOptions, count: number) => Promise<ReadonlyArray<string | undefined>>,
  ) {}

  get(id: string): ActorRecord | undefined {
    return this.actors.get(id)
  }

  /** The actors started and not dead. */
  live(): Array<ActorRecord> {
    return [...this.actors.values()].filter((r) => r.alive)
  }

  /** Starts `count` actor processes of a definition; every one is ready, or none is left running. */
  async spawn(definition: ActorDefinition, options: SpawnOptions): Promise<Array<ActorRecord>> {
    if (!isActorDefinition(definition)) throw new InvalidArgumentError({ message: `spawn takes an actor definition (defineActor), not ${describe(definition)}`, argument: "definition" })
    const count = checkCount(options.count)
    const env = checkEnv(options.env)
    const startTimeoutMs = checkTimeout(options.startTimeoutMs, "startTimeoutMs") ?? DEFAULT_START_TIMEOUT_MS
    // Unknown transport names fail here, before any process starts.
    for (const name of Object.keys(definition.spec.methods as object)) {
      const transport = methodOf(definition, name)?.options.tensorTransport
      if (transport !== undefined) this.driver.runtime.transport(transport)
    }
    const hosts = await this.place(options, count)
    const flags = [...this.launch.execArgv, ...actorTypeScriptFlags(definition.moduleUrl, this.launch.transports)]
    const starts = Array.from({ length: count }, (_, index) => this.start(definition, index, flags, env, hosts[index]))
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
      )) ?? (this.driver.identity.closed ? closedWhileStarting(records) : undefined)
    for (const r of records) this.starting.delete(r)
    if (failure !== undefined) {
      // None is handed out: every process of this call is gone before the failure is reported
      // (unless the kernel holds one past the grace).
      for (const r of records) r.process.kill()
      await settledWithin(
        records.map((r) => r.exited),
        SHUTDOWN_GRACE_MS,
      )
      throw failure
    }
    for (const r of records) this.actors.set(r.id, r)
    return records
  }

  private start(
    definition: ActorDefinition,
    index: number,
    flags: ReadonlyArray<string>,
    env: Readonly<Record<string, string>>,
    host: string | undefined,
  ): { readonly record: ActorRecord; readonly ready: Promise<void> } {
    const n = this.nextActor.get(definition.name) ?? 0
    this.nextActor.set(definition.name, n + 1)
    const id = `${definition.name}-${n}`
    const child = this.launcher({ id, definition, flags, env, host })
    const on = onHost(host)
    let record!: ActorRecord
    const whenReady = new Promise<void>((resolve, reject) => {
      let ready = false
      const exitedWhileStarting = (how: string) =>
        reject(this.driver.identity.closed ? closedWhileStarting([record]) : new ActorDiedError({ message: `actor ${id}${on} exited while starting${how}`, actor: id }))
      const exited = new Promise<void>((done) => child.onExit(() => done()))
      const control = new Connection(child.control, {
        // An actor's messages to the driver never carry a body.
        maxBodyBytes: 0,
        onFrame: decoded(decodeFromActor, (message, frame) => {
          // An actor keeps what it describes within MAX_VALUE_BYTES: only a larger frame can hold more,
          // which the messages that carry it on could not. Throwing drops the actor's connection.
          if (frame.headerBytes > MAX_VALUE_BYTES && (message._tag === "Put" || message._tag === "Result") && message.info !== undefined) {
            checkDescribed(message.info)
          }
          if (!ready) {
            if (message._tag === "Ready") {
              ready = true
              record.agentAddress = message.agentAddress
              resolve()
            } else if (message._tag === "InitFailed") {
              reject(fromWireError(message.error, { actor: id, method: "init" }))
              child.kill()
            }
            return
          }
          this.onMessage(record, message)
        }),
        onClose: (error) => {
          if (!ready) exitedWhileStarting(error ? `: ${error.message}` : "")
          // A closed control socket usually means the process is gone: its exit status says why.
          else setTimeout(() => this.died(record, error ?? new Error("its control connection closed")), EXIT_STATUS_WAIT_MS).unref()
        },
      })
      record = {
        id,
        definition,
        process: child,
        control,
        agentAddress: "",
        alive: true,
        dispatched: Promise.resolve(),
        undispatched: 0,
        inFlight: new Map(),
        wholeResults: new Set(),
        exited,
      }
      child.onExit((how) => {
        if (!ready) exitedWhileStarting(how)
        this.died(record, undefined, how)
      })
      control.send({
        _tag: "Init",
        actorId: id,
        index,
        moduleUrl: definition.moduleUrl,
        exportName: definition.name,
        transports: this.launch.transports,
        clusterDir: this.launch.dir,
        clusterId: this.driver.identity.id,
        maxConcurrency: definition.spec.maxConcurrency ?? 1,
        transferTimeoutMs: this.driver.transferTimeoutMs,
      } satisfies ToActor)
    })
    return { record, ready: whenReady }
  }

  private onMessage(record: ActorRecord, message: FromActor): void {
    switch (message._tag) {
      case "Prefetched":
        this.requests.answer(message.reqId, message.error, message, { actor: record.id, method: "broadcast" }, record.id)
        return
      case "Inspection":
        this.requests.resolve(message.reqId, message, record.id)
        return
      case "Ready":
      case "InitFailed":
        record.control.close(new ProtocolError({ message: `${message._tag} from ${record.id} after start` }))
        return
      default:
        this.events.message(record, message)
    }
  }

  /** A request over an actor's control connection, answered by the reply tagged `replyTag`. */
  request<T extends ControlReply["_tag"]>(
    record: ActorRecord,
    message: (reqId: number) => ToActor,
    replyTag: T,
    timeout?: { readonly ms: number; readonly timedOut: () => Error },
  ): Promise<Extract<ControlReply, { _tag: T }>> {
    if (!record.alive) return Promise.reject(dead(record))
    const reply = this.requests.request((reqId) => record.control.send(message(reqId)), { peer: record.id, ...(timeout ? { timeout } : {}) })
    return reply.then((r) => {
      if (r._tag !== replyTag) throw new ProtocolError({ message: `${record.id} answered a request of the driver with ${r._tag}, not ${replyTag}` })
      return r as Extract<ControlReply, { _tag: T }>
    })
  }

  /**
   * Fails with CrossHostError when `transport` moves bytes within one machine only and the processes
   * (actors, or "driver") are not all on one: it names their hosts.
   */
  requireSameHost(transport: string, processIds: ReadonlyArray<string>): void {
    if (this.driver.runtime.transport(transport).capabilities.sameHost !== true) return
    const where = (id: string) => this.actors.get(id)?.process.host ?? "driver"
    const hosts = [...new Set(processIds.map(where))]
    if (hosts.length < 2) return
    throw new CrossHostError({
      message: `"${transport}" moves bytes within one machine, and ${processIds.map((id) => `${id} is on ${where(id)}`).join(", ")}: use a transport that crosses hosts (object-store, gloo, nixl) between hosts ${hosts.join(" and ")}`,
      transport,
      hosts,
    })
  }

  /** What every live actor holds; those that did not answer within `timeoutMs` are listed as unresponsive. */
  async inspect(timeoutMs: number): Promise<{ processes: Record<string, ActorInspection>; unresponsive: Array<string> }> {
    const processes: Record<string, ActorInspection> = {}
    const unresponsive: Array<string> = []
    await Promise.all(
      this.live().map(async (r) => {
        const timedOut = () => new TimeoutError({ message: `${r.id} did not answer within ${timeoutMs} ms`, timeoutMs })
        try {
          processes[r.id] = (await this.request(r, (reqId) => ({ _tag: "Inspect", reqId }), "Inspection", { ms: timeoutMs, timedOut })).inspection
        } catch (error) {
          // One that died meanwhile holds nothing.
          if (error instanceof TimeoutError) unresponsive.push(r.id)
        }
      }),
    )
    return { processes, unresponsive }
  }

  /** An actor's handle: its methods submit calls through `submit`; it carries the cluster that made it. */
  handleOf<D extends ActorDefinition>(
    record: ActorRecord,
    submit: (record: ActorRecord, method: string, args: ReadonlyArray<unknown>, options: CallOptions) => ObjectRef<unknown>,
  ): ActorHandle<D> {
    const methods: Record<string, unknown> = {}
    for (const name of Object.keys(record.definition.spec.methods as object)) {
      const call = (options: CallOptions) => {
        const checked = checkOptions(options, `${name}.options`)
        return (...args: Array<unknown>) => submit(record, name, args, checked)
      }
      methods[name] = Object.assign(call({}), { options: call })
    }
    const handle = { ...methods, actorId: record.id, definition: record.definition }
    Object.defineProperty(handle, handleCluster, { value: this.driver.identity })
    return handle as ActorHandle<D>
  }

  /** The record of an actor handle this cluster made (WrongClusterError for another's, ClusterClosedError once shut down). */
  actorOf(handle: { actorId: string }): ActorRecord {
    const cluster = (handle as { [handleCluster]?: ClusterIdentity } | null)?.[handleCluster]
    if (cluster === undefined) {
      throw new InvalidArgumentError({ message: `${describe(handle)} is not an actor handle (cluster.spawn returns them)`, argument: "actor" })
    }
    requireSameCluster(cluster, this.driver.identity, `actor ${handle.actorId}`)
    return this.actors.get(handle.actorId)!
  }

  /** Marks an actor dead (once), ends its process, fails the requests it was to answer and tells the driver. */
  died(record: ActorRecord, error: Error | undefined, exit?: string): void {
    if (!record.alive) return
    record.alive = false
    const how = error ? `: ${error.message}` : (exit ?? "")
    const died = new ActorDiedError({ message: `actor ${record.id}${onHost(record.process.host)} died${how}`, actor: record.id })
    if (!this.driver.identity.closed) record.process.kill()
    this.requests.failPeer(record.id, died)
    this.events.died(record, died)
  }

  /**
   * Ends every actor process, those still starting too: the started ones are asked to shut down (and
   * first finish the releases they have under way), and killed past the grace.
   */
  async shutdown(): Promise<void> {
    const records = [...this.actors.values()]
    for (const r of records) if (r.alive) r.control.send({ _tag: "Shutdown" } satisfies ToActor)
    // An actor still starting holds nothing yet: it ends at once.
    const starting = [...this.starting]
    for (const r of starting) r.process.kill()
    await Promise.all(
      [...records, ...starting].map(async (r) => {
        await settledWithin([r.exited], SHUTDOWN_GRACE_MS)
        if (r.process.ended()) return
        r.process.kill()
        await settledWithin([r.exited], SHUTDOWN_GRACE_MS)
      }),
    )
  }
}
