/**
 * A start() whose transport module cannot be loaded fails with TransportLoadError, and leaves no
 * thread behind: its transfer agent, started beside the main thread's transports, ends with it (a
 * program that retries its start must not pile up idle agents). In a process of its own, whose
 * threads are its own.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { expect, it } from "vitest"

const DRIVER = fileURLToPath(new URL("./fixtures/start-failures-driver.mjs", import.meta.url))

it("fails with TransportLoadError each time, and its agent's thread ends with it", () => {
  const out = execFileSync(process.execPath, [DRIVER], { encoding: "utf8", timeout: 60_000 })
  const { tags, first, last } = JSON.parse(out.trim().split("\n").at(-1)!) as { tags: Array<string>; first: number; last: number }
  expect(tags).toEqual(Array(4).fill("TransportLoadError"))
  expect(last).toBeLessThanOrEqual(first)
}, 60_000)
