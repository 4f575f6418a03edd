/**
 * How an actor process is started, by the driver on its own machine and by a host's node
 * (`tensorlane node`) on its host: the same command, flags and end-of-parent signal.
 */
import { type ChildProcess, spawn as spawnProcess, spawnSync } from "node:child_process"
import { Socket } from "node:net"
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
    // A probe that could not run (no process or descriptor left just now) says nothing of setpriv: the next launch asks again.
    if (probe?.error !== undefined && (probe.error as NodeJS.ErrnoException).code !== "ENOENT") return []
    launcher = probe?.status === 0 ? prefix : []
  }
  return launcher
}

const HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb"

/**
 * An actor's environment with glibc's transparent huge pages turned on for its large allocations
 * (glibc 2.35 and later; other C libraries ignore the variable): a tensor's fresh storage faults
 * once per 2 MiB instead of once per 4 KiB, which a fresh cluster's large calls feel
 * (docs/decisions/transparent-huge-pages.md). An environment that sets the tunable itself keeps its
 * own value; its other tunables stay.
 */
export const actorEnvironment = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const tunables = env.GLIBC_TUNABLES
  if (tunables?.split(":").some((tunable) => tunable.startsWith(`${HUGE_PAGES_TUNABLE}=`))) return env
  const hugePages = `${HUGE_PAGES_TUNABLE}=1`
  return { ...env, GLIBC_TUNABLES: tunables === undefined || tunables === "" ? hugePages : `${tunables}:${hugePages}` }
}

/** An actor process and its control connection: a socket pair on fd 3. */
export interface LaunchedActor {
  readonly child: ChildProcess
  readonly control: Socket
}

/**
 * Starts an actor process. `flags` are the Node.js flags (the actor module's TypeScript flags among
 * them). A process that cannot start (EAGAIN: the process limit; EMFILE: no descriptor left for its
 * control connection; ENOENT: its launcher is gone) is told to `failed` right after this call, its
 * control connection closed: Node reports it by an 'error' event, never by 'exit', and an 'error'
 * nothing listens to would end this process with every actor it started.
 */
export const launchActor = (flags: ReadonlyArray<string>, env: NodeJS.ProcessEnv, failed: (error: Error) => void): LaunchedActor => {
  // --expose-gc lets the host memory cache trade a cheap collection for page faults (internal/hostMemoryCache.ts).
  const [command, ...args] = [...deathSignalLauncher(), process.execPath, ...flags, "--expose-gc", actorMainPath]
  const child = spawnProcess(command!, args, { stdio: ["ignore", "inherit", "inherit", "pipe"], env: actorEnvironment(env) })
  // Without a descriptor for it there is no control connection: a closed one stands in.
  const control = (child.stdio?.[3] as Socket | null | undefined) ?? new Socket().destroy()
  let spawned = false
  child.once("spawn", () => (spawned = true))
  child.on("error", (error) => {
    // One after the start (a kill that failed) changes nothing: the process's exit tells the rest.
    if (spawned) return
    failed(error)
    control.destroy()
  })
  return { child, control }
}
