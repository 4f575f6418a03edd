/**
 * The end of a cluster: shutdown with releases under way.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Tensor, start } from "@tensorlane/core"
import { afterAll, describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"

const LARGE = 1 << 20
const ASYNC_RELEASE = fileURLToPath(new URL("./fixtures/asyncReleaseTransport.mjs", import.meta.url))

describe("shutdown", () => {
  const releaseDir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-release-"))
  afterAll(() => fs.rmSync(releaseDir, { recursive: true, force: true }))

  it("waits for the releases under way of a transport whose release is async", async () => {
    // Read by the transport in every process of the cluster (actors inherit the driver's environment).
    process.env.TENSORLANE_TEST_RELEASE_DIR = releaseDir
    const other = await start({ transports: [ASYNC_RELEASE] })
    try {
      const [x] = await other.spawn(Helper)
      const make = x.make.options({ tensorTransport: "asyncrelease" })
      const refs = [make(LARGE), make(LARGE), make(64), await other.put(Tensor.full([LARGE], 2), { tensorTransport: "asyncrelease" })]
      await other.get(refs)
      expect(fs.readdirSync(releaseDir)).toHaveLength(4)
      for (const ref of refs) ref.release()
    } finally {
      await other.shutdown()
      delete process.env.TENSORLANE_TEST_RELEASE_DIR
    }
    expect(fs.readdirSync(releaseDir)).toEqual([])
  })
})
