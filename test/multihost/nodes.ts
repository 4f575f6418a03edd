/** `tensorlane node` in the harness's hosts, for the tests of clusters across hosts. */
import type { ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { type Cluster, start } from "@tensorlane/core"
import { afterAll, beforeAll } from "vitest"
import { type Harness, type HarnessOptions, startHosts } from "./harness.ts"

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

/** Runs the node of host `name` where it cannot start: resolves with its exit code and what it printed. */
export const failedNode = (env: Harness, name: string, config: string): Promise<{ readonly code: number | null; readonly output: string }> =>
  new Promise((resolve) => {
    const child = env.exec(name, [process.execPath, CLI, "node", "--config", config, "--name", name])
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.once("close", (code) => resolve({ code, output }))
  })

/** Ends a node with SIGTERM (it ends its actors) and waits for its exit. */
export const stopNode = async (node: RunningNode): Promise<void> => {
  if (node.child.exitCode !== null || node.child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => node.child.once("exit", () => resolve()))
  node.child.kill("SIGTERM")
  await exited
}


/** The transports the drivers of these tests load: every method of the test actors names one of them. */
export const HOST_TRANSPORTS = ["@tensorlane/transport-gloo", "@tensorlane/transport-nixl", "@tensorlane/symmetric-mem"]

/** What `useHosts` makes before a file's tests: the harness, a node per host, and (with `transports`) a driver's cluster. */
export interface Hosts {
  env: Harness
  readonly nodes: Map<string, RunningNode>
  cluster: Cluster
}

/**
 * Registers a test file's beforeAll/afterAll pair: the harness's hosts with a node on each and, when
 * `transports` is given, a cluster of this process joined to them; all ended after the file's tests.
 */
export const useHosts = (options: HarnessOptions, transports?: ReadonlyArray<string>): Hosts => {
  const hosts = { nodes: new Map<string, RunningNode>() } as Hosts
  beforeAll(async () => {
    hosts.env = await startHosts(options)
    for (const node of await Promise.all(hosts.env.hosts.map((h) => startNode(hosts.env, h.name)))) hosts.nodes.set(node.name, node)
    if (transports !== undefined) hosts.cluster = await start({ cluster: hosts.env.clusterFile, transports })
  }, 120_000)
  afterAll(async () => {
    await hosts.cluster?.shutdown()
    await Promise.all([...hosts.nodes.values()].map(stopNode))
    await hosts.env?.teardown()
  }, 60_000)
  return hosts
}

/** Whether a process (of any namespace of the harness: they share the pid namespace) still runs. */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
