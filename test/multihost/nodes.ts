/** `tensorlane node` in the harness's hosts, for the tests of clusters across hosts. */
import type { ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { Harness } from "./harness.ts"

const CLI = fileURLToPath(new URL("../../packages/cli/dist/main.js", import.meta.url))

export interface RunningNode {
  readonly name: string
  readonly child: ChildProcess
  /** What it printed, stdout and stderr. */
  output: string
}

/** Starts the node of host `name` and resolves once it listens (rejects if it exits first or is not listening within 20 s). */
export const startNode = (env: Harness, name: string, config = env.clusterFile): Promise<RunningNode> =>
  new Promise((resolve, reject) => {
    const child = env.exec(name, [process.execPath, CLI, "node", "--config", config, "--name", name])
    const node: RunningNode = { name, child, output: "" }
    const timer = setTimeout(() => reject(new Error(`node ${name} did not listen within 20 s: ${node.output}`)), 20_000)
    const onData = (chunk: Buffer) => {
      node.output += chunk.toString()
      if (node.output.includes("listening on")) {
        clearTimeout(timer)
        resolve(node)
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      reject(new Error(`node ${name} exited (code ${code}, signal ${signal}) before it listened: ${node.output}`))
    })
  })

/** Ends a node with SIGTERM (it ends its actors) and waits for its exit. */
export const stopNode = async (node: RunningNode): Promise<void> => {
  if (node.child.exitCode !== null || node.child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => node.child.once("exit", () => resolve()))
  node.child.kill("SIGTERM")
  await exited
}

