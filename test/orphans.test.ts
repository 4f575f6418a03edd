/** A SIGKILLed driver leaves no actor process behind (DESIGN §3.12), even one busy in a long method. */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, expect, it } from "vitest"
import { eventually, isGone } from "./helpers.ts"

// The killed driver cannot remove its cluster directory: give it a temporary directory of its own.
const tmp = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-orphans-"))
let pids: Array<number> = []

afterAll(() => {
  for (const pid of pids) if (!isGone(pid)) process.kill(pid, "SIGKILL")
  fs.rmSync(tmp, { recursive: true, force: true })
})

it("actors exit within 5 s of their driver's SIGKILL", async () => {
  const driver = spawn(process.execPath, [fileURLToPath(new URL("./fixtures/orphan-driver.mjs", import.meta.url))], {
    env: { ...process.env, TMPDIR: tmp },
    stdio: ["ignore", "pipe", "inherit"],
  })
  const exited = new Promise<void>((resolve) => driver.once("exit", () => resolve()))
  let output = ""
  const line = await new Promise<string>((resolve, reject) => {
    driver.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("\n")) resolve(output.split("\n")[0])
    })
    driver.once("exit", (code) => reject(new Error(`the driver exited early (code ${code}): ${output}`)))
  })
  pids = (JSON.parse(line) as { pids: Array<number> }).pids
  expect(pids).toHaveLength(2)
  expect(pids.every((pid) => !isGone(pid))).toBe(true)
  driver.kill("SIGKILL")
  await exited
  const killedAt = Date.now()
  const alive = await eventually(() => pids.filter((pid) => !isGone(pid)), (left) => left.length === 0, 5_000)
  expect(alive).toEqual([])
  expect(Date.now() - killedAt).toBeLessThan(5_000)
}, 30_000)
