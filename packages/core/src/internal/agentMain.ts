/** Entry point of the transfer agent worker thread. */
import { parentPort, receiveMessageOnPort, workerData } from "node:worker_threads"
import { Agent, type AgentCommand, type AgentWorkerData } from "./agent/Agent.js"
import type { BufferUse } from "./quarantine.js"
import { toWireError } from "./wireError.js"

const port = parentPort!
const agent = new Agent({
  ...(workerData as AgentWorkerData),
  emit: (event) => port.postMessage(event),
  takeQueuedCommands: () => {
    for (let queued = receiveMessageOnPort(port); queued !== undefined; queued = receiveMessageOnPort(port)) run(queued.message)
  },
})

agent.start().then(
  () => port.postMessage({ started: true, address: agent.address }),
  (error) => port.postMessage({ started: false, error: toWireError(error) }),
)

const reply = (id: number, outcome: { value: unknown } | { error: unknown }): void => {
  try {
    port.postMessage("value" in outcome ? { id, value: outcome.value } : { id, error: toWireError(outcome.error) })
  } catch (cause) {
    // A value that cannot be cloned (a transport's metadata, say) must not kill the agent.
    port.postMessage({ id, error: toWireError(cause) })
  }
}

function run({ id, command }: { id: number; command: AgentCommand }): void {
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

port.on("message", run)
