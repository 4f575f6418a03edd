/**
 * TypeScript actor and transport modules. Node 22.18+ (and 23.6+) strips types by itself; 22.6 to
 * 22.17 does with a flag, which actor processes get; older Node needs tsx, looked up from the module
 * being imported (the user's project, not the working directory) and registered in each thread that
 * imports one: module hooks registered in a thread apply to that thread only, so a transfer agent's
 * worker registers its own.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { UnsupportedOperationError } from "../Errors.js"

export const isTypeScript = (url: string): boolean => url.startsWith("file:") && /\.[cm]?ts$/.test(new URL(url).pathname)

const version = process.versions.node.split(".").map(Number)
const atLeast = (major: number, minor: number): boolean => version[0] > major || (version[0] === major && version[1] >= minor)

/** Node strips types without a flag (22.18+ on the 22 line, 23.6+). */
const stripsByDefault = atLeast(23, 6) || (version[0] === 22 && atLeast(22, 18))

/** tsx's ESM API (`tsx/esm/api`, whose `register()` adds its hooks to the calling thread) as the module at `moduleUrl` would import it. */
const tsxApiFor = (moduleUrl: string): string | undefined => {
  try {
    const manifest = createRequire(moduleUrl).resolve("tsx/package.json")
    const exports = (JSON.parse(fs.readFileSync(manifest, "utf8")) as { exports?: Record<string, { import?: { default?: unknown } }> }).exports
    const target = exports?.["./esm/api"]?.import?.default
    return typeof target === "string" ? pathToFileURL(join(dirname(manifest), target)).href : undefined
  } catch {
    return undefined
  }
}

const cannotImport = (moduleUrl: string, what: string): UnsupportedOperationError =>
  new UnsupportedOperationError({
    message: `${what} ${fileURLToPath(moduleUrl)} is TypeScript, which Node ${process.versions.node} cannot import by itself, and tsx cannot be found from it. Install tsx in its project (npm install --save-dev tsx), use Node >= 22.18, or point at compiled JavaScript.`,
  })

/**
 * The flags of an actor process that imports `actorModule` and `transports`: on 22.6 to 22.17 the
 * one that strips types. On older Node its threads register tsx themselves; this checks that the
 * actor module finds it, so that spawn fails before it starts any process (the driver has loaded
 * the transports already).
 */
export const actorTypeScriptFlags = (actorModule: string, transports: ReadonlyArray<string>): Array<string> => {
  if (![actorModule, ...transports].some(isTypeScript) || stripsByDefault) return []
  if (atLeast(22, 6)) return ["--experimental-strip-types", "--no-warnings=ExperimentalWarning"]
  if (isTypeScript(actorModule) && tsxApiFor(actorModule) === undefined) throw cannotImport(actorModule, "actor module")
  return []
}

let registered: Promise<unknown> | undefined

/**
 * Imports an actor or transport module. A TypeScript one, where this thread does not strip types,
 * first gets tsx's hooks registered in this thread (once), found from the module; without them a
 * thread that has none (one whose process was started without tsx, a worker) fails with the fix.
 */
export const importModule = async (moduleUrl: string, what: string): Promise<Record<string, unknown>> => {
  const typeScript = isTypeScript(moduleUrl) && !(process.features as { typescript?: unknown }).typescript
  const api = typeScript ? tsxApiFor(moduleUrl) : undefined
  if (api !== undefined) {
    registered ??= import(api).then((tsx: { register: () => unknown }) => tsx.register())
    await registered
  }
  try {
    return (await import(moduleUrl)) as Record<string, unknown>
  } catch (error) {
    if (typeScript && (error as { code?: unknown }).code === "ERR_UNKNOWN_FILE_EXTENSION") throw cannotImport(moduleUrl, what)
    throw error
  }
}
