/**
 * What the loader says when the addon or libgloo cannot be loaded: each case in a fresh process
 * (a process loads the addon once), through the built package as a user imports it.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import type { GlooStatus } from "../src/glooStatus.ts"
import { inFreshProcess } from "./fixtures/freshProcess.ts"

const built = fileURLToPath(new URL("../build/Release/tensorlane_gloo.node", import.meta.url))
const scratch = fs.mkdtempSync(join(os.tmpdir(), "gloo-loader-"))

afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

const statusWith = (addon: string | undefined): Promise<GlooStatus> =>
  inFreshProcess(`const { glooStatus } = await import("@tensorlane/transport-gloo"); console.log(JSON.stringify(glooStatus()))`, "TENSORLANE_GLOO_ADDON", addon)

/** A copy of the addon whose dependency on libgloo.so.0 names libgloo.so.9, which no machine has. */
const withoutLibgloo = (): string => {
  const bytes = fs.readFileSync(built)
  const needed = Buffer.from("libgloo.so.0\0")
  const at = bytes.indexOf(needed)
  if (at < 0) throw new Error(`${built} does not name libgloo.so.0`)
  bytes.write("libgloo.so.9", at)
  const path = join(scratch, "tensorlane_gloo.node")
  fs.writeFileSync(path, bytes)
  return path
}

describe("the gloo addon's loader", () => {
  it("loads the package's own build by default", async () => {
    const status = await statusWith(undefined)
    expect(status).toMatchObject({ ready: true, addon: built })
    expect(status.error).toBeUndefined()
    expect(status.library).toMatch(/libgloo\.so/)
  })

  it("takes TENSORLANE_GLOO_ADDON as the only candidate, and says so when it names nothing", async () => {
    const missing = join(scratch, "nowhere", "tensorlane_gloo.node")
    const status = await statusWith(missing)
    expect(status.ready).toBe(false)
    expect(status.addon).toEqual([missing])
    expect(status.error).toBe(
      `TENSORLANE_GLOO_ADDON names ${missing}, which does not exist: point it at a built tensorlane_gloo.node, or unset it to use the package's own build (npm run build:native -w @tensorlane/transport-gloo (needs libgloo-dev: sudo apt-get install libgloo-dev), or bash tools/setup.sh)`,
    )
  })

  it("names libgloo, what dlopen said and the fix when the library is missing", async () => {
    const status = await statusWith(withoutLibgloo())
    expect(status.ready).toBe(false)
    expect(status.error).toMatch(/^libgloo\.so\.0 \(Gloo, Debian package libgloo0 from libgloo-dev\) cannot be loaded by the gloo addon: .*libgloo\.so\.9: cannot open shared object file.*Fix: sudo apt-get install libgloo-dev/)
  })

  it("says a file that is no addon cannot be loaded, and how to rebuild", async () => {
    const garbage = join(scratch, "garbage.node")
    fs.writeFileSync(garbage, "not an ELF file")
    const status = await statusWith(garbage)
    expect(status.ready).toBe(false)
    expect(status.error).toMatch(new RegExp(`^the @tensorlane/transport-gloo addon cannot be loaded: ${garbage}: .*Rebuild it: npm run build:native`))
  })
})
