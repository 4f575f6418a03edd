/**
 * A driver that dies without shutting down (DESIGN §3.12) leaves no actor process behind, even one
 * busy in a long method or stopped, and no cluster directory: it removes it as it exits, and the next
 * start sweeps the directory of a killed one.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { start } from "@tensorlane/core"
import { afterAll, expect, it } from "vitest"
import { eventually, isGone } from "./helpers.ts"

// The dead drivers' directories land in a temporary directory of the test's own.
const tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-orphans-"))
const pids: Array<number> = []

afterAll(() => {
  for (const pid of pids) if (!isGone(pid)) process.kill(pid, "SIGKILL")
  fs.rmSync(tmp, { recursive: true, force: true })
})

const clusterDirs = (): Array<string> => fs.readdirSync(tmp).filter((name) => name.startsWith("tensorlane-"))

/** Starts the fixture driver; resolves with it and its actors' pids once the busy actor is busy. */
const startDriver = async (mode?: "throw"): Promise<{ driver: ChildProcess; exited: Promise<void>; actors: Array<number> }> => {
  const driver = spawn(process.execPath, [fileURLToPath(new URL("./fixtures/orphan-driver.mjs", import.meta.url)), ...(mode ? [mode] : [])], {
    env: { ...process.env, TMPDIR: tmp },
    stdio: ["ignore", "pipe", "pipe"],
  })
  const exited = new Promise<void>((resolve) => driver.once("exit", () => resolve()))
  let output = ""
  let errors = ""
  driver.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()))
  const line = await new Promise<string>((resolve, reject) => {
    driver.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("\n")) resolve(output.split("\n")[0])
    })
    driver.once("exit", (code) => reject(new Error(`the driver exited early (code ${code}): ${output}${errors}`)))
  })
  const actors = (JSON.parse(line) as { pids: Array<number> }).pids
  pids.push(...actors)
  expect(actors).toHaveLength(2)
  expect(actors.every((pid) => !isGone(pid))).toBe(true)
  return { driver, exited, actors }
}

const goneWithin5s = async (actors: ReadonlyArray<number>, since: number): Promise<void> => {
  const alive = await eventually(() => actors.filter((pid) => !isGone(pid)), (left) => left.length === 0, 5_000)
  expect(alive).toEqual([])
  expect(Date.now() - since).toBeLessThan(5_000)
}

it("actors exit within 5 s of their driver's SIGKILL, a stopped one too; the next start sweeps its directory", async () => {
  const { driver, exited, actors } = await startDriver()
  const [idle] = actors
  process.kill(idle!, "SIGSTOP")
  expect(clusterDirs()).toHaveLength(1)
  driver.kill("SIGKILL")
  await exited
  await goneWithin5s(actors, Date.now())
  const [dead] = clusterDirs()
  const previous = process.env.TMPDIR
  process.env.TMPDIR = tmp
  try {
    const cluster = await start()
    expect(clusterDirs()).not.toContain(dead)
    expect(clusterDirs()).toHaveLength(1)
    await cluster.shutdown()
  } finally {
    if (previous === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = previous
  }
  expect(clusterDirs()).toEqual([])
}, 30_000)

it("an uncaught exception in the driver ends its actors and leaves no cluster directory", async () => {
  const { exited, actors } = await startDriver("throw")
  await exited
  const diedAt = Date.now()
  expect(clusterDirs()).toEqual([])
  await goneWithin5s(actors, diedAt)
}, 30_000)
