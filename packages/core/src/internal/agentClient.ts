/** The main thread's side of its process's transfer agent. */
import type { Worker } from "node:worker_threads"
import type { AgentCommand, AgentStartOptions } from "./agent/Agent.js"
import type { AgentEvent } from "./agent/Memberships.js"
import type { WireError } from "./messages.js"
import { TransferError } from "../Errors.js"
import { type AgentThread, agentThread } from "./agentThread.js"
import { Requests } from "./requests.js"
import { fromWireError } from "./wireError.js"

type Reply =
  | { id: number; value?: unknown; error?: WireError }
  | { started: boolean; address?: string; error?: WireError }
  | AgentEvent
  /** After a failed command: its transport no longer writes the command's tensors. */
  | { released: number }

/** A receive or collective: its outcome, and when its transport no longer writes its tensors. */
export interface Transfer {
  readonly done: Promise<void>
  readonly released: () => Promise<void>
}

export class AgentClient {
  private readonly calls = new Requests<unknown>()
  /** Transfers the agent ran, by command id, until their transport no longer writes their tensors. */
  private readonly releases = new Map<number, () => void>()
  private dead: Error | undefined

  /** Where the agent listens, once started. */
  address = ""

  private constructor(private readonly worker: Worker) {}

  /** Starts the agent on `thread`: by default the one an actor started ahead (agentThread.ts), or a new one. */
  static start(options: AgentStartOptions, onEvent: (event: AgentEvent) => void, thread: AgentThread = agentThread()): Promise<AgentClient> {
    const worker = thread.worker
    const client = new AgentClient(worker)
    return new Promise((resolve, reject) => {
      const failed = (error: Error): void => {
        reject(error)
        client.failAll(error)
      }
      const exited = (code: number): void =>
        failed(new TransferError({ message: `the transfer agent of ${options.processId} exited (code ${code})`, transport: "agent" }))
      const ended = thread.ended
      if (ended !== undefined) return "error" in ended ? failed(ended.error) : exited(ended.exitCode)
      worker.on("error", failed)
      worker.on("exit", exited)
      // Referenced until it has started, so that a process waiting for it stays alive.
      worker.ref()
      // Its first message: the thread waits for its options.
      worker.postMessage(options)
      worker.on("message", (message: Reply) => {
        if ("started" in message) {
          // The agent must never keep a process alive on its own: it is referenced only while it works for us.
          worker.unref()
          if (message.started) {
            client.address = message.address!
            resolve(client)
          }
          else {
            reject(fromWireError(message.error!, { actor: options.processId, method: "agent start" }))
            // Nothing will use it: its thread must not stay behind (a start() that failed, retried).
            void worker.terminate()
          }
        } else if ("event" in message) {
          onEvent(message)
        } else if ("released" in message) {
          client.release(message.released)
        } else {
          client.settle(message)
        }
      })
    })
  }

  private settle(reply: { id: number; value?: unknown; error?: WireError }): void {
    this.calls.answer(reply.id, reply.error, reply.value, { actor: "agent", method: "command" })
    if (this.calls.size === 0) this.worker.unref()
  }

  private failAll(error: Error): void {
    this.dead ??= error
    this.calls.failAll(error)
    // Nobody is left to say that a failed transfer's tensors are free again: they stay quarantined.
    this.releases.clear()
  }

  private release(id: number): void {
    this.releases.get(id)?.()
    this.releases.delete(id)
  }

  command<A = unknown>(command: AgentCommand): Promise<A> {
    return this.post<A>(command).reply
  }

  /**
   * A receive or collective run by the agent. Its tensors are free once it succeeded; after a failure,
   * once the agent says its transport no longer writes them (never, for a transport that cannot tell).
   */
  transfer(command: Extract<AgentCommand, { op: "receive" | "collective" }>): Transfer {
    const { id, reply } = this.post<void>(command)
    if (id === undefined) return { done: reply, released: () => Promise.resolve() }
    const released = new Promise<void>((resolve) => this.releases.set(id, resolve))
    reply.then(() => this.release(id), () => undefined)
    return { done: reply, released: () => released }
  }

  /** Posts a command to the agent; no id when nothing was posted (the agent is gone, or the command cannot be cloned). */
  private post<A>(command: AgentCommand): { id: number | undefined; reply: Promise<A> } {
    if (this.dead !== undefined) return { id: undefined, reply: Promise.reject(this.dead) }
    let id: number | undefined
    const reply = this.calls.request((reqId) => {
      id = reqId
      this.worker.postMessage({ id: reqId, command })
    }) as Promise<A>
    // Referenced while a command waits for its answer (one that could not be posted waits for none).
    if (this.calls.size === 1) this.worker.ref()
    return { id, reply }
  }

  async close(): Promise<void> {
    await this.command({ op: "close" }).catch(() => undefined)
    await this.worker.terminate()
  }
}
