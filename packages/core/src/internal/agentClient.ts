/** The main thread's side of its process's transfer agent. */
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import type { AgentCommand, AgentEvent, AgentWorkerData } from "./agent.js"
import type { WireError } from "./messages.js"
import { TransferError } from "../Errors.js"
import { fromWireError } from "./wireError.js"

type Reply = { id: number; value?: unknown; error?: WireError } | { started: boolean; error?: WireError } | AgentEvent

export class AgentClient {
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private nextId = 1
  private dead: Error | undefined

  private constructor(
    private readonly worker: Worker,
    readonly address: string,
  ) {}

  static start(options: AgentWorkerData, onEvent: (event: AgentEvent) => void): Promise<AgentClient> {
    const worker = new Worker(fileURLToPath(new URL("./agent-main.js", import.meta.url)), { workerData: options })
    const client = new AgentClient(worker, options.address)
    return new Promise((resolve, reject) => {
      worker.on("error", (error) => {
        reject(error)
        client.failAll(error)
      })
      worker.on("exit", (code) => {
        const error = new TransferError({ message: `the transfer agent of ${options.processId} exited (code ${code})`, transport: "agent" })
        reject(error)
        client.failAll(error)
      })
      worker.on("message", (message: Reply) => {
        if ("started" in message) {
          // The agent must never keep a process alive on its own: it is referenced only while it works for us.
          worker.unref()
          if (message.started) resolve(client)
          else reject(fromWireError(message.error!, { actor: options.processId, method: "agent start" }))
        } else if ("event" in message) {
          onEvent(message)
        } else {
          client.settle(message)
        }
      })
    })
  }

  private settle(reply: { id: number; value?: unknown; error?: WireError }): void {
    const call = this.calls.get(reply.id)
    if (call === undefined) return
    this.calls.delete(reply.id)
    if (this.calls.size === 0) this.worker.unref()
    if (reply.error !== undefined) call.reject(fromWireError(reply.error, { actor: "agent", method: "command" }))
    else call.resolve(reply.value)
  }

  private failAll(error: Error): void {
    this.dead ??= error
    for (const call of this.calls.values()) call.reject(error)
    this.calls.clear()
  }

  command<A = unknown>(command: AgentCommand): Promise<A> {
    if (this.dead !== undefined) return Promise.reject(this.dead)
    const id = this.nextId++
    return new Promise<A>((resolve, reject) => {
      if (this.calls.size === 0) this.worker.ref()
      this.calls.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.worker.postMessage({ id, command })
    })
  }

  async close(): Promise<void> {
    await this.command({ op: "close" }).catch(() => undefined)
    await this.worker.terminate()
  }
}
