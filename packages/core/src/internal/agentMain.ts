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

port.on("message", ({ id, command }: { id: number; command: AgentCommand }) => {
  agent.command(command).then(
    (value) => port.postMessage({ id, value }),
    (error) => port.postMessage({ id, error: toWireError(error) }),
  )
})
