/**
 * The multi-host harness's teardown, as a process of its own: started (detached) before the harness
 * makes anything, it waits for its standard input to close, which happens when the harness tears
 * down or when the process that made the harness ends in any way (also SIGKILL), and then removes
 * everything of harness `id`: every process in its namespaces, the namespaces (with their veths and
 * bridge), the driver's veth in the root namespace, and its folder. It finds them by name, so a
 * harness that stopped half-way is removed the same. Exit code 0 when nothing is left.
 *   node reaper.mjs <id> <folder>
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"

const [id, folder] = process.argv.slice(2)
if (!/^[0-9a-f]{6}$/.test(id ?? "") || folder === undefined || !folder.includes(`tl-${id}`)) {
  console.error("usage: node reaper.mjs <6 hex digits> <folder named tl-<id>...>")
  process.exit(2)
}

const ip = (...args) => execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
const attempt = (call) => {
  try {
    return call()
  } catch {
    return undefined
  }
}

const namespaces = () => (attempt(() => ip("netns", "list")) ?? "").split("\n").map((line) => line.split(" ")[0]).filter((ns) => ns.startsWith(`tl-${id}-`))
const pids = (ns) => (attempt(() => ip("netns", "pids", ns)) ?? "").split("\n").filter((pid) => /^\d+$/.test(pid)).map(Number)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const teardown = async () => {
  // Processes first: a namespace lives on while a process is in it, and so do the mounts of a host.
  const deadline = Date.now() + 10_000
  let left = namespaces().flatMap(pids)
  while (left.length > 0 && Date.now() < deadline) {
    for (const pid of left) attempt(() => process.kill(pid, "SIGKILL"))
    await sleep(50)
    left = namespaces().flatMap(pids)
  }
  if (left.length > 0) {
    // Never remove the folder while a process of a host may still have it (or a path bound into it) mounted.
    console.error(`tensorlane harness ${id}: processes ${left.join(", ")} outlived SIGKILL; leaving ${folder}`)
    return false
  }
  for (const ns of namespaces()) attempt(() => ip("netns", "delete", ns))
  attempt(() => ip("link", "delete", `tl-${id}-d`))
  fs.rmSync(folder, { recursive: true, force: true })
  return namespaces().length === 0 && attempt(() => ip("link", "show", `tl-${id}-d`)) === undefined && !fs.existsSync(folder)
}

let started = false
const reap = () => {
  if (started) return
  started = true
  teardown().then(
    (clean) => process.exit(clean ? 0 : 1),
    (error) => {
      console.error(`tensorlane harness ${id}: ${error?.stack ?? error}`)
      process.exit(1)
    },
  )
}
// Its output may be a pipe of the process that is gone: a failed write must not end it before it is done.
process.stderr.on("error", () => {})
process.stdin.on("error", reap)
process.stdin.on("end", reap)
process.stdin.on("close", reap)
process.stdin.resume()
