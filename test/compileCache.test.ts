/**
 * Actor processes and their transfer agents keep Node's compile cache (Node 22.8 and later) in the
 * per-user cache, under tensorlane/compile-cache, readable by the user alone, and write nothing
 * else there; before Node 22.8, with NODE_DISABLE_COMPILE_CACHE=1, or where it cannot be written,
 * nothing is written and actors work as before.
 */
import * as fs from "node:fs"
import * as nodeModule from "node:module"
import * as os from "node:os"
import { join } from "node:path"
import { start } from "@tensorlane/core"
import { afterAll, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"
import { eventually, isGone } from "./helpers.ts"

const tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-compile-cache-test-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))

const nodeHasCache = "enableCompileCache" in nodeModule

/** Runs one call on an actor started with `env`, and waits for its process to end (it writes its cache then). */
const actorRun = async (env: Record<string, string>): Promise<void> => {
  const cluster = await start()
  try {
    const [helper] = await cluster.spawn(Helper, { env })
    expect(await cluster.get(helper!.numel(helper!.make(4096)))).toBe(1024)
    const pid = await cluster.get(helper!.pid())
    await cluster.shutdown()
    await eventually(() => isGone(pid), (gone) => gone)
  } finally {
    await cluster.shutdown()
  }
}

/** Every file under `dir`, relative to it. */
const filesUnder = (dir: string): Array<string> =>
  fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<fs.Dirent>).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1)) : []

it.runIf(nodeHasCache)("an actor writes its compiled modules under tensorlane/compile-cache, each file its user's alone, and nothing else", async () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  await actorRun({ XDG_CACHE_HOME: home })
  const files = filesUnder(home)
  expect(files.length).toBeGreaterThan(20)
  for (const file of files) {
    expect(file).toMatch(/^tensorlane\/compile-cache\/v[^/]+\/[^/]+$/)
    expect(fs.statSync(join(home, file)).mode & 0o077).toBe(0)
  }
})

it.runIf(!nodeHasCache)("before Node 22.8 an actor writes nothing there", async () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  await actorRun({ XDG_CACHE_HOME: home })
  expect(filesUnder(home)).toEqual([])
})

it("with NODE_DISABLE_COMPILE_CACHE=1 an actor writes nothing there", async () => {
  const home = fs.mkdtempSync(join(tmp, "cache-"))
  await actorRun({ XDG_CACHE_HOME: home, NODE_DISABLE_COMPILE_CACHE: "1" })
  expect(filesUnder(home)).toEqual([])
})

it("where the cache cannot be made (a file in its path), actors start and call as before", async () => {
  const file = join(tmp, "not-a-directory")
  fs.writeFileSync(file, "")
  await actorRun({ XDG_CACHE_HOME: file })
  expect(fs.readFileSync(file, "utf8")).toBe("")
})
