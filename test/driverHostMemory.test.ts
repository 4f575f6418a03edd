/**
 * A program that reads large results itself recycles their memory as actors do: its host cache
 * collects when a size runs out (tensorlane turns on --expose-gc at run time where the program did not
 * start with it), and raises the size's allowance at each such collection, having no idle moments.
 * Without that, each 256 MiB result took fresh pages (65536 faults) and a loop of them ran at the
 * speed of page faults. 256 MiB, so that a collection pays against one block's faults even on a busy
 * machine (up to 134 ms).
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"

const DRIVER = fileURLToPath(new URL("./fixtures/released-gets-driver.mjs", import.meta.url))

it("a driver started without --expose-gc reads results of 256 MiB into recycled memory", () => {
  const run = spawnSync(process.execPath, [DRIVER], { encoding: "utf8", timeout: 120_000 })
  expect(run.status, run.stderr).toBe(0)
  const { faultsPerCall } = JSON.parse(run.stdout.trim().split("\n").at(-1)!)
  // A fresh 256 MiB block is 65536 pages; recycled ones fault only the calls' own smaller allocations.
  expect(faultsPerCall).toBeLessThan(16384)
}, 150_000)
