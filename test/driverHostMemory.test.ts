/**
 * A program that reads large results itself recycles their memory as actors do: its host cache
 * collects when a size runs out (tensorlane turns on --expose-gc at run time where the program did not
 * start with it), and raises the size's allowance at each such collection, having no idle moments.
 * Without that, each 32 MiB result took fresh pages (8192 faults) and a loop of them ran at the speed
 * of page faults.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"

const DRIVER = fileURLToPath(new URL("./fixtures/released-gets-driver.mjs", import.meta.url))

it("a driver started without --expose-gc reads results of 32 MiB into recycled memory", () => {
  const run = spawnSync(process.execPath, [DRIVER], { encoding: "utf8", timeout: 120_000 })
  expect(run.status, run.stderr).toBe(0)
  const { faultsPerCall } = JSON.parse(run.stdout.trim().split("\n").at(-1)!)
  // A fresh 32 MiB block is 8192 pages; recycled ones fault only the calls' own small allocations.
  expect(faultsPerCall).toBeLessThan(2048)
}, 150_000)
