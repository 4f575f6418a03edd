/**
 * The worker thread of a process's transfer agent, started apart from its options. An actor process
 * starts it first thing (actorEntry.ts), so that the thread loads its modules while the main thread
 * loads its own, and hands it its options once the driver's Init has come (AgentClient).
 */
import { fileURLToPath } from "node:url"
import { SHARE_ENV, Worker } from "node:worker_threads"

/** How the thread ended: its error, or its exit code. */
export type AgentThreadEnd = { readonly error: Error } | { readonly exitCode: number }

export class AgentThread {
  readonly worker: Worker
  private end: AgentThreadEnd | undefined

  /** `entry` is the thread's module: the agent's own, but for tests. */
  constructor(entry = new URL("./agent-main.js", import.meta.url)) {
    // The process's environment itself, not a copy taken now: an actor's module may still set the agent's settings.
    this.worker = new Worker(fileURLToPath(entry), { env: SHARE_ENV })
    // It must never keep a process alive on its own: AgentClient references it while it works.
    this.worker.unref()
    // Until AgentClient listens, an error or exit is kept for it rather than lost (or thrown, for an error).
    this.worker.on("error", (error) => (this.end ??= { error }))
    this.worker.on("exit", (exitCode) => (this.end ??= { exitCode }))
  }

  /** How it ended, if it did. */
  get ended(): AgentThreadEnd | undefined {
    return this.end
  }
}

let early: AgentThread | undefined

/** Starts this process's agent thread ahead of its options; the next `agentThread()` takes it. */
export const startAgentThread = (): void => {
  early = new AgentThread()
}

/** The thread started ahead, if there is one not taken yet; else a new one. */
export const agentThread = (): AgentThread => {
  const thread = early ?? new AgentThread()
  early = undefined
  return thread
}
