/**
 * Actor processes and their transfer agents keep Node's compile cache (Node 22.8 and later) in the
 * per-user cache, under tensorlane/compile-cache (0700, files 0600), and write nothing else there;
 * before Node 22.8, with NODE_DISABLE_COMPILE_CACHE set, where the folder cannot be made or where
 * another user could write in it, nothing is written and actors work as before. Each case in a
 * driver process of its own, whose stderr its actors share.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as nodeModule from "node:module"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, expect, it } from "vitest"

const DRIVER = fileURLToPath(new URL("./fixtures/compile-cache-driver.mjs", import.meta.url))
const tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-compile-cache-test-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const nodeHasCache = "enableCompileCache" in nodeModule
// Set in the environment of the tests, it would turn the cache off in every actor.
const cacheAllowed = nodeHasCache && process.env.NODE_DISABLE_COMPILE_CACHE === undefined

/** One call on an actor started with `env` (and no NODE_COMPILE_CACHE of the caller's); the run's stderr. */
const actorRun = (env: Record<string, string>): string => {
  const run = spawnSync(process.execPath, [DRIVER, JSON.stringify({ NODE_COMPILE_CACHE: "", ...env })], { encoding: "utf8", timeout: 60_000 })
  expect(run.status, run.stderr).toBe(0)
  expect(JSON.parse(run.stdout.trim().split("\n").at(-1)!)).toEqual({ numel: 1024 })
  return run.stderr
}

/** Every entry under `dir`, relative to it. */
const entriesUnder = (dir: string): Array<string> => (fs.readdirSync(dir, { recursive: true }) as Array<string>).sort()

it.runIf(cacheAllowed)("an actor and its agent write their compiled modules under tensorlane/compile-cache, the user's alone, and nothing else", () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  // Node's own trace of its compile cache says which modules each thread wrote or found written.
  // Under load a thread's message now and then goes missing from it (Node's doing): a second start,
  // on the same cache, says so again, reading what the first wrote.
  const seen = (trace: string, module: string) =>
    new RegExp(`((Creating temporary file for cache of|writing cache for ESM) \\S+/${module}-\\w+\\.js|reading cache from \\S+ for ESM \\S+/${module}-\\w+\\.js\\.\\.\\.(?! no such file))`).test(trace)
  const run = () => actorRun({ XDG_CACHE_HOME: home, NODE_DEBUG_NATIVE: "COMPILE_CACHE" })
  const first = run()
  const traces = ["actorMain", "agentMain"].every((module) => seen(first, module)) ? first : first + run()
  for (const module of ["actorMain", "agentMain"]) expect(seen(traces, module), `${module} written, or read back, in two starts`).toBe(true)
  const cache = join(home, "tensorlane", "compile-cache")
  expect(fs.statSync(cache).mode & 0o777).toBe(0o700)
  const files = entriesUnder(home).filter((entry) => fs.statSync(join(home, entry)).isFile())
  expect(files.length).toBeGreaterThan(20)
  for (const file of files) {
    expect(file).toMatch(/^tensorlane\/compile-cache\/v[^/]+\/[^/]+$/)
    expect(fs.statSync(join(home, file)).mode & 0o077).toBe(0)
  }
})

it.runIf(cacheAllowed)("where another user could write in the cache folder, an actor does not use it", () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  const cache = join(home, "tensorlane", "compile-cache")
  fs.mkdirSync(cache, { recursive: true })
  fs.chmodSync(cache, 0o777)
  actorRun({ XDG_CACHE_HOME: home })
  expect(entriesUnder(cache)).toEqual([])
})

it.runIf(!nodeHasCache)("before Node 22.8 an actor writes nothing there", () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  actorRun({ XDG_CACHE_HOME: home })
  expect(entriesUnder(home)).toEqual([])
})

it("with NODE_DISABLE_COMPILE_CACHE set, to anything, an actor writes nothing there", () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  actorRun({ XDG_CACHE_HOME: home, NODE_DISABLE_COMPILE_CACHE: "0" })
  expect(entriesUnder(home)).toEqual([])
})

it("where the cache cannot be made (a file in its path), actors start and call as before", () => {
  const file = join(tmp, "not-a-directory")
  fs.writeFileSync(file, "")
  actorRun({ XDG_CACHE_HOME: file })
  expect(fs.readFileSync(file, "utf8")).toBe("")
})
