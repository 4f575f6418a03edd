/** The transfer agent's worker thread, after agentEntry.ts. */
import { parentPort, receiveMessageOnPort } from "node:worker_threads"
import { Agent, type AgentCommand, type AgentStartOptions } from "./agent/Agent.js"
import { flushCompileCache } from "./compileCache.js"
import type { BufferUse } from "./quarantine.js"
import { toWireError } from "./wireError.js"

const port = parentPort!

/** Starts the agent. */
const serve = (options: AgentStartOptions): Agent => {
  const agent = new Agent({
    ...options,
    emit: (event) => port.postMessage(event),
    takeQueuedCommands: () => {
      for (let queued = receiveMessageOnPort(port); queued !== undefined; queued = receiveMessageOnPort(port)) run(agent, queued.message)
    },
  })
  agent.start().then(
    () => {
      port.postMessage({ started: true, address: agent.address })
      flushCompileCache()
    },
    (error) => port.postMessage({ started: false, error: toWireError(error) }),
  )
  return agent
}

const reply = (id: number, outcome: { value: unknown } | { error: unknown }): void => {
  try {
    port.postMessage("value" in outcome ? { id, value: outcome.value } : { id, error: toWireError(outcome.error) })
  } catch (cause) {
    // A value that cannot be cloned (a transport's metadata, say) must not kill the agent.
    port.postMessage({ id, error: toWireError(cause) })
  }
}

function run(agent: Agent, { id, command }: { id: number; command: AgentCommand }): void {
  let use: BufferUse | undefined
  agent.command(command, (u) => (use = u)).then(
    (value) => reply(id, { value }),
    (error) => {
      reply(id, { error })
      // The main thread keeps the tensors of a failed transfer until this; it ignores it for other commands.
      void (use?.released() ?? Promise.resolve()).then(() => port.postMessage({ released: id }))
    },
  )
}

let agent: Agent | undefined
// The first message is the agent's options (agentThread.ts: an actor starts this thread before it has them); every later one a command.
port.on("message", (message: AgentStartOptions | { id: number; command: AgentCommand }) => {
  if (agent === undefined) agent = serve(message as AgentStartOptions)
  else run(agent, message as { id: number; command: AgentCommand })
})
