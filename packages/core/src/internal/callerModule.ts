/**
 * The user's module that called into tensorlane (the file that calls `start()` or builds the cluster
 * layer): relative transport paths are taken from its folder, not from the working directory.
 */
import * as fs from "node:fs"
import { dirname, isAbsolute, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"

/** Whether `file` is code of a tensorlane package (its dist/ or src/), not a test or an example beside it. */
const isTensorlaneCode = (file: string): boolean => {
  for (let dir = dirname(file); dirname(dir) !== dir; dir = dirname(dir)) {
    const manifest = join(dir, "package.json")
    if (!fs.existsSync(manifest)) continue
    let name: unknown
    try {
      name = (JSON.parse(fs.readFileSync(manifest, "utf8")) as { name?: unknown }).name
    } catch {
      return false
    }
    const top = relative(dir, file).split(sep)[0]
    return typeof name === "string" && name.startsWith("@tensorlane/") && (top === "dist" || top === "src")
  }
  return false
}

/** Frames past tensorlane's own: core's, then a transport package's layer, then the user's. */
const STACK_DEPTH = 32

/**
 * The folder of the first module on the current stack that is not tensorlane's code, Node's own or
 * under node_modules; the working directory when there is none (a REPL, `node -e`).
 */
export const callerFolder = (): string => {
  const limit = Error.stackTraceLimit
  const prepare = Error.prepareStackTrace
  let sites: ReadonlyArray<NodeJS.CallSite>
  try {
    Error.stackTraceLimit = STACK_DEPTH
    Error.prepareStackTrace = (_error, callSites) => callSites
    const holder: { stack?: unknown } = {}
    Error.captureStackTrace(holder, callerFolder)
    // V8 formats the stack when it is first read: while the override is in place.
    sites = Array.isArray(holder.stack) ? holder.stack : []
  } finally {
    Error.stackTraceLimit = limit
    Error.prepareStackTrace = prepare
  }
  for (const site of sites) {
    const name = site.getFileName()
    if (name === undefined || name === null || name.startsWith("node:")) continue
    const file = name.startsWith("file:") ? fileURLToPath(name) : name
    if (!isAbsolute(file) || file.includes(`${sep}node_modules${sep}`) || isTensorlaneCode(file)) continue
    return dirname(file)
  }
  return process.cwd()
}
