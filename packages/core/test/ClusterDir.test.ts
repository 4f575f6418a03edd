/**
 * Cluster directories: a start sweeps those whose driver is gone (a dead pid, or a live pid that a
 * later process took) and keeps every other one (a live driver's, another pid namespace's, one that
 * names no driver); removing one is enough to forget it.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, expect, it } from "vitest"
import { createClusterDir, removeClusterDir } from "../src/internal/clusterDir.js"
import { pidNamespace, startTimeOf } from "../src/internal/processes.js"

let tmp: string
let previous: string | undefined

beforeEach(() => {
  tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-clusterdir-test-"))
  previous = process.env.TMPDIR
  process.env.TMPDIR = tmp
})

afterEach(() => {
  if (previous === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = previous
  fs.rmSync(tmp, { recursive: true, force: true })
})

/** A directory as a driver with this identity would leave it. */
const leftBy = (name: string, owner: object | undefined): string => {
  const dir = join(tmp, name)
  fs.mkdirSync(dir)
  fs.writeFileSync(join(dir, "driver.sock"), "")
  if (owner !== undefined) fs.writeFileSync(join(dir, "driver"), JSON.stringify(owner))
  return name
}

it("sweeps the directories of dead drivers and keeps the others", () => {
  const pidns = pidNamespace()
  const start = startTimeOf("self")
  const exited = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" })
  const deadPid = Number(exited.stdout)
  const dead = leftBy("tensorlane-dead00", { pidns, pid: deadPid, start: "1" })
  const reused = leftBy("tensorlane-reused", { pidns, pid: process.pid, start: `${start}0` })
  const live = leftBy("tensorlane-live00", { pidns, pid: process.pid, start })
  const foreign = leftBy("tensorlane-ns0000", { pidns: "pid:[1]", pid: deadPid, start: "1" })
  const unnamed = leftBy("tensorlane-nodrvr", undefined)
  const mine = createClusterDir()
  const left = fs.readdirSync(tmp)
  expect(left).not.toContain(dead)
  expect(left).not.toContain(reused)
  expect(left.sort()).toEqual([live, foreign, unnamed, mine.slice(tmp.length + 1)].sort())
  expect(JSON.parse(fs.readFileSync(join(mine, "driver"), "utf8"))).toEqual({ pidns, pid: process.pid, start })
  removeClusterDir(mine)
  expect(fs.existsSync(mine)).toBe(false)
})

it("where TMPDIR is missing, it is an invalid setting naming TMPDIR, not a file system error", () => {
  process.env.TMPDIR = join(tmp, "missing")
  expect(() => createClusterDir()).toThrow(
    expect.objectContaining({ _tag: "InvalidSettingError", variable: "TMPDIR", value: join(tmp, "missing"), message: expect.stringMatching(/ENOENT.*set TMPDIR to a folder this user can write to$/) }),
  )
})
