/**
 * A transport's `prepare`: its one-time setup runs once in each actor process, in the transfer
 * agent's thread, as the actor starts (never in the driver), and a failing one leaves the actor and
 * its transfers working.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { start } from "@tensorlane/core"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"
import { eventually, sleep } from "./helpers.ts"

const PREPARING = fileURLToPath(new URL("./fixtures/preparingTransport.mjs", import.meta.url))
const LARGE = 1 << 20

let dir: string
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-prepare-"))
  // Read by the transport in every process of the cluster (actors inherit the driver's environment).
  process.env.TENSORLANE_TEST_PREPARE_DIR = dir
})
afterEach(() => {
  delete process.env.TENSORLANE_TEST_PREPARE_DIR
  delete process.env.TENSORLANE_TEST_PREPARE_FAILS
  fs.rmSync(dir, { recursive: true, force: true })
})

/** The threads each process ran the transport's prepare on, one entry per run, by pid. */
const preparedBy = (): Map<number, Array<number>> =>
  new Map(
    fs
      .readdirSync(dir)
      .filter((name) => /^\d+$/.test(name))
      .map((name) => [Number(name), fs.readFileSync(join(dir, name), "utf8").trim().split("\n").map(Number)]),
  )

describe.each([
  ["succeeds", "0"],
  ["fails", "1"],
])("a transport whose prepare %s", (_name, fails) => {
  it("runs it once in each actor's transfer agent, not in the driver, and transfers after it", async () => {
    process.env.TENSORLANE_TEST_PREPARE_FAILS = fails
    const cluster = await start({ transports: [PREPARING] })
    try {
      const [a, b] = await cluster.spawn(Helper, { count: 2 })
      const pids = [await cluster.get(a.pid()), await cluster.get(b.pid())]
      const prepared = await eventually(preparedBy, (by) => by.size === 2)
      expect([...prepared.keys()].sort()).toEqual([...pids].sort())
      const numel = b.numel(a.make.options({ tensorTransport: "preparing" })(LARGE))
      expect(await cluster.get(numel)).toBe(LARGE / 4)
      // Nothing runs it again later.
      await sleep(200)
      for (const threads of preparedBy().values()) {
        expect(threads).toHaveLength(1)
        // A worker thread's id: the transfer agent, not the actor's main thread (0).
        expect(threads[0]).toBeGreaterThan(0)
      }
      expect(preparedBy().has(process.pid)).toBe(false)
    } finally {
      await cluster.shutdown()
    }
  })
})
