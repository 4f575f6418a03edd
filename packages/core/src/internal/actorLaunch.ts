/**
 * How an actor process is started, by the driver on its own machine and by a host's node
 * (`tensorlane node`) on its host: the same command, flags and end-of-parent signal.
 */
import { type ChildProcess, spawn as spawnProcess, spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const actorMainPath = fileURLToPath(new URL("./actor-main.js", import.meta.url))

let launcher: ReadonlyArray<string> | undefined

/**
 * What actor processes start under: Linux's parent-death signal, set by util-linux's setpriv before
 * it runs Node, kills an actor the moment its parent (the driver, or its host's node) dies, even a
 * stopped one (which runs no code, so its own lifeline cannot end it). Where setpriv is missing only
 * the lifeline ends actors.
 */
const deathSignalLauncher = (): ReadonlyArray<string> => {
  if (launcher === undefined) {
    const prefix = ["setpriv", "--pdeathsig", "KILL", "--"]
    const probe = process.platform === "linux" ? spawnSync(prefix[0], [...prefix.slice(1), process.execPath, "--version"], { stdio: "ignore" }) : undefined
    launcher = probe?.status === 0 ? prefix : []
  }
  return launcher
}

/**
 * Starts an actor process: its control connection is a socket pair on fd 3 (`child.stdio[3]`).
 * `flags` are the Node.js flags (the actor module's TypeScript flags among them).
 */
export const launchActor = (flags: ReadonlyArray<string>, env: NodeJS.ProcessEnv): ChildProcess => {
  // --expose-gc lets the host memory cache trade a cheap collection for page faults (internal/hostMemoryCache.ts).
  const [command, ...args] = [...deathSignalLauncher(), process.execPath, ...flags, "--expose-gc", actorMainPath]
  return spawnProcess(command!, args, { stdio: ["ignore", "inherit", "inherit", "pipe"], env })
}
