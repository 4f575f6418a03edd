/** Entry point of the transfer agent worker thread. */
import { parentPort, workerData } from "node:worker_threads"
import { Agent, type AgentCommand, type AgentOptions } from "./agent.js"
import { toWireError } from "./wireError.js"

const port = parentPort!
const agent = new Agent({ ...(workerData as Omit<AgentOptions, "emit">), emit: (event) => port.postMessage(event) })

agent.start().then(
  () => port.postMessage({ started: true }),
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

port.on("message", ({ id, command }: { id: number; command: AgentCommand }) => {
  agent.command(command).then(
    (value) => reply(id, { value }),
    (error) => reply(id, { error }),
  )
})
