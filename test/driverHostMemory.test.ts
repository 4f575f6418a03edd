/**
 * A program that reads large results itself recycles their memory as actors do: its host cache
 * collects when a size runs out (tensorlane turns on --expose-gc at run time where the program did not
 * start with it), weighs that collection against the page faults of every block of the size it has
 * out, and raises the size's allowance at each such collection, having no idle moments. Without that,
 * each 256 MiB result took fresh pages (65536 faults) and a loop of them ran at the speed of page
 * faults; and at 4 MiB, where a collection of the program's heap costs more than one block's faults,
 * half the results did.
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"

const DRIVER = fileURLToPath(new URL("./fixtures/released-gets-driver.mjs", import.meta.url))

const faultsPerCall = (bytes: number, calls: number): number => {
  const run = spawnSync(process.execPath, [DRIVER, String(bytes), String(calls)], { encoding: "utf8", timeout: 120_000 })
  expect(run.status, run.stderr).toBe(0)
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!).faultsPerCall
}

// A fresh block is one fault per 4 KiB page; recycled ones fault only the calls' own smaller
// allocations (tens of pages).
it("a driver started without --expose-gc reads results of 256 MiB into recycled memory", () => {
  expect(faultsPerCall(256 << 20, 30)).toBeLessThan(16384)
}, 150_000)

it("a driver started without --expose-gc reads results of 4 MiB into recycled memory", () => {
  expect(faultsPerCall(4 << 20, 300)).toBeLessThan(128)
}, 150_000)
