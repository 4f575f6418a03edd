/**
 * An actor process, after actorEntry.ts. The driver talks to it over fd 3 (a socket pair); the
 * actor's transfer agent, a worker thread, serves its objects to peers over a Unix socket. The parts of an
 * actor are in `actor/`: its calls (CallQueue), its borrows of the driver's objects (Borrows), when it
 * recycles host memory (IdleRecycler) and what its methods reach (ActorContext); this module starts
 * them and hands them the driver's messages.
 */
import * as net from "node:net"
import { join } from "node:path"
import { isActorDefinition } from "../Actor.js"
import { InvalidArgumentError, ProtocolError } from "../Errors.js"
import { ObjectRef } from "../ObjectRef.js"
import { type DriverReply, callContext } from "./actor/ActorContext.js"
import { Borrows } from "./actor/Borrows.js"
import { CallQueue } from "./actor/CallQueue.js"
import { IdleRecycler } from "./actor/IdleRecycler.js"
import type { ClusterMember } from "./agent/Agent.js"
import type { Membership } from "./agent/Memberships.js"
import { flushCompileCache } from "./compileCache.js"
import { CLUSTER_CONFIG_VARIABLE, CLUSTER_MEMBER_VARIABLE } from "./node/variables.js"
import { Connection, decoded } from "./connection.js"
import type { Frame } from "./frame.js"
import { type FromActor, type ToActor, decodeToActor } from "./messages.js"
import { ProcessRuntime } from "./processRuntime.js"
import { Requests } from "./requests.js"
import { importModule } from "./typeScript.js"
import { toWireError } from "./wireError.js"

type Init = Extract<ToActor, { _tag: "Init" }>

const control = new Connection(new net.Socket({ fd: 3, readable: true, writable: true }), {
  onFrame: decoded(decodeToActor, (message, frame) => onMessage(message, frame)),
  // The driver is gone (or broke the protocol): an actor never outlives its driver.
  onClose: () => process.exit(0),
})

const send = (message: FromActor): void => control.send(message)

/**
 * Sends a call's result. Its value fits (checked when it was produced); transfer stats too many to
 * travel beside it are left out, so that the driver still hears of the call (its metrics miss them).
 */
const answer = (result: Extract<FromActor, { _tag: "Result" }>): void => {
  try {
    send(result)
  } catch {
    send({ ...result, transfers: [] })
  }
}

let actor: Actor | undefined

/** The host this actor runs on in a cluster across hosts: its node says so (Node.ts). */
const clusterMember = (): ClusterMember | undefined => {
  const config = process.env[CLUSTER_CONFIG_VARIABLE]
  const member = process.env[CLUSTER_MEMBER_VARIABLE]
  return config !== undefined && member !== undefined ? { config, member } : undefined
}

const onMessage = (message: ToActor, frame: Frame): void => {
  if (message._tag === "Init") {
    Actor.start(message).then(
      (started) => {
        actor = started
        send({ _tag: "Ready", agentAddress: started.runtime.agent.address, pid: process.pid })
        flushCompileCache()
      },
      (error) => send({ _tag: "InitFailed", error: toWireError(error) }),
    )
    return
  }
  if (actor === undefined) {
    control.close(new ProtocolError({ message: `${message._tag} before Init` }))
    return
  }
  actor.handle(message, frame.body)
}

class Actor {
  /** Set by the driver's Shutdown: the process ends with what it holds, so a free its closing cuts short is no failure. */
  private closing = false

  private constructor(
    private readonly init: Init,
    readonly runtime: ProcessRuntime,
    private readonly calls: CallQueue,
    private readonly recycler: IdleRecycler,
    private readonly requests: Requests<DriverReply>,
  ) {}

  static async start(init: Init): Promise<Actor> {
    const module = await importModule(init.moduleUrl, "actor module")
    const definition = module[init.exportName]
    if (!isActorDefinition(definition)) {
      throw new InvalidArgumentError({ message: `${init.moduleUrl} has no actor definition exported as "${init.exportName}"`, argument: "definition" })
    }
    let calls: CallQueue | undefined
    let recycler: IdleRecycler | undefined
    let memberships: ReadonlyArray<Membership> = []
    const borrows = new Borrows({ id: init.clusterId, closed: false }, send, () => calls?.idle ?? true)
    const runtime = await ProcessRuntime.start({
      processId: init.actorId,
      cluster: borrows.cluster,
      address: join(init.clusterDir, `${init.actorId}.sock`),
      member: clusterMember(),
      transports: init.transports,
      parentPid: process.ppid,
      makeRef: (id) => new ObjectRef(id, borrows),
      onEvent: (event) => {
        memberships = event.groups
      },
      whileReceiving: () => recycler?.whileReceiving(),
    })
    recycler = new IdleRecycler(runtime.store, () => calls?.busy ?? false)
    const state = await definition.spec.init({ index: init.index, actorId: init.actorId })
    const requests = new Requests<DriverReply>()
    const settings = { actorId: init.actorId, transferTimeoutMs: init.transferTimeoutMs, runtime, borrows, send, requests, memberships: () => memberships }
    calls = new CallQueue({
      actorId: init.actorId,
      maxConcurrency: init.maxConcurrency,
      transferTimeoutMs: init.transferTimeoutMs,
      definition,
      state,
      runtime,
      answer,
      context: (transfers, cancellation) => callContext(settings, transfers, cancellation),
      idle: borrows.flush,
      ended: () => recycler?.afterCall(),
    })
    return new Actor(init, runtime, calls, recycler, requests)
  }

  handle(message: Exclude<ToActor, Init>, body: Buffer | undefined): void {
    switch (message._tag) {
      case "Call":
        if (message.frees !== undefined) this.free(message.frees)
        this.calls.push(message, body)
        return
      case "Free":
        this.free(message.objectIds)
        return
      case "Cancel":
        this.calls.cancel(message.callId)
        return
      case "Resolved":
        this.requests.answer(message.reqId, message.error, message, { actor: "driver", method: "get" })
        return
      case "PutAck":
        this.requests.answer(message.reqId, message.error, message, { actor: "driver", method: "put" })
        return
      case "AllGathered":
        this.requests.answer(message.reqId, message.error, message, { actor: "driver", method: "allGather" })
        return
      case "Inspect":
        this.runtime.inspect().then(
          (inspection) => send({ _tag: "Inspection", reqId: message.reqId, inspection }),
          (error) => console.error("tensorlane: inspect failed:", error),
        )
        return
      case "PeerDied":
        this.runtime.peerDied(message.peer)
        return
      case "Prefetch":
        this.runtime
          .resolve(message.info, { timeoutMs: this.init.transferTimeoutMs, collective: message.collective })
          .then(
            (r) => {
              this.runtime.store.pinReceived(message.info.objectId, r.value, r.tensors)
              send({ _tag: "Prefetched", reqId: message.reqId, transfers: r.stat ? [r.stat] : [] })
            },
            (error) => send({ _tag: "Prefetched", reqId: message.reqId, error: toWireError(error), transfers: [] }),
          )
        return
      case "Shutdown":
        this.closing = true
        this.runtime.close().finally(() => process.exit(0))
        return
    }
  }

  private free(objectIds: ReadonlyArray<string>): void {
    this.runtime.free(objectIds).then(
      () => this.recycler.afterFree(),
      (error) => {
        if (!this.closing) console.error("tensorlane: free failed:", error)
      },
    )
  }
}
