/**
 * What a program on one machine loads with tensorlane: neither the whole of Effect (its index) nor
 * the cluster engine's modules (Effect's cluster, its Postgres storage), which only a cluster across
 * hosts and a host's node need. Each module loaded stays in the heap for good, and every full
 * collection marks all of it: the driver's (one per allowance of refs left to the garbage collector)
 * and the actors' (the host memory cache's) cost in proportion; with these modules, about twice as
 * much ([dropped-refs.md](../../../docs/decisions/dropped-refs.md)).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, expect, it } from "vitest"

const tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-loaded-modules-test-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

/** A module resolve hook that writes every URL resolved to a file. */
const hooks = join(tmp, "hooks.mjs")
fs.writeFileSync(
  hooks,
  `import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(process.env.LOADED_LOG, resolved.url + "\\n")
  return resolved
}
`,
)
const register = join(tmp, "register.mjs")
fs.writeFileSync(register, `import { register } from "node:module"\nregister(${JSON.stringify(pathToFileURL(hooks).href)})\n`)
const core = new URL("../dist/index.js", import.meta.url).href

/** The URLs of the modules that `program` (module code, `core` bound to tensorlane's index) loads. */
const loadedBy = (program: string): Array<string> => {
  const name = `${Math.random()}`
  const log = join(tmp, `loaded-${name}.txt`)
  const main = join(tmp, `program-${name}.mjs`)
  fs.writeFileSync(main, `const core = await import(${JSON.stringify(core)})\n${program}\n`)
  const run = spawnSync(process.execPath, ["--import", pathToFileURL(register).href, main], {
    env: { ...process.env, LOADED_LOG: log },
    encoding: "utf8",
    timeout: 60_000,
  })
  expect(run.stderr).toBe("")
  expect(run.status).toBe(0)
  return fs.readFileSync(log, "utf8").split("\n").filter(Boolean)
}

/** The modules of Effect's index, its cluster and its Postgres storage, among `urls`. */
const heavy = (urls: Array<string>): Array<string> =>
  urls.filter((url) => url.endsWith("/node_modules/effect/dist/index.js") || url.includes("/node_modules/effect/dist/cluster/") || url.includes("/node_modules/@effect/sql-pg/"))

it("a cluster on one machine loads neither Effect's index nor the cluster engine", () => {
  const urls = loadedBy("const cluster = await core.start()\nawait cluster.shutdown()")
  expect(urls).toContain(core)
  expect(urls.some((url) => url.includes("/node_modules/effect/dist/"))).toBe(true)
  expect(heavy(urls)).toEqual([])
}, 90_000)

it("a host's node loads the engine when it starts", () => {
  const urls = loadedBy(`await core.startNode({ config: ${JSON.stringify(join(tmp, "none.json"))}, name: "h1" }).catch((error) => { if (error._tag !== "ClusterConfigError") throw error })`)
  expect(heavy(urls)).not.toEqual([])
}, 90_000)
