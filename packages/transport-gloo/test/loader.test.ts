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

/** What glooStatus() returned, or the facts of the error it threw. */
type Outcome =
  | { readonly status: GlooStatus }
  | { readonly error: { readonly tag: string; readonly message: string; readonly library: string; readonly tried: ReadonlyArray<string>; readonly fix: string } }

const built = fileURLToPath(new URL("../build/Release/tensorlane_gloo.node", import.meta.url))
/** The platform package as the repository's build fills it (packages/platforms/gloo-linux-x64-gnu). */
const platform = fileURLToPath(new URL("../../platforms/gloo-linux-x64-gnu/", import.meta.url))
const scratch = fs.mkdtempSync(join(os.tmpdir(), "gloo-loader-"))

afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

const statusWith = (addon: string | undefined): Promise<Outcome> =>
  inFreshProcess(
    `const { glooStatus } = await import("@tensorlane/transport-gloo")
     try { console.log(JSON.stringify({ status: glooStatus() })) }
     catch (e) { console.log(JSON.stringify({ error: { tag: e._tag, message: e.message, library: e.library, tried: e.tried, fix: e.fix } })) }`,
    "TENSORLANE_GLOO_ADDON",
    addon,
  )

/** The NativeLibraryError glooStatus() threw (fails the test when it returned). */
const refusal = (outcome: Outcome) => {
  if (!("error" in outcome)) throw new Error(`glooStatus() returned ${JSON.stringify(outcome.status)}`)
  expect(outcome.error.tag).toBe("NativeLibraryError")
  return outcome.error
}

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
  it("loads the platform package's addon by default, with the libgloo it bundles", async () => {
    const outcome = await statusWith(undefined)
    expect(outcome).toMatchObject({ status: { addon: join(platform, "tensorlane_gloo.node"), library: join(platform, "lib", "libgloo.so.0") } })
  })

  it("takes TENSORLANE_GLOO_ADDON as the only candidate, and says so when it names nothing", async () => {
    const missing = join(scratch, "nowhere", "tensorlane_gloo.node")
    const error = refusal(await statusWith(missing))
    expect(error.tried).toEqual([missing])
    expect(error.message).toBe(`TENSORLANE_GLOO_ADDON names ${missing}, which does not exist: point it at a built tensorlane_gloo.node, or unset it to use the installed addon (${error.fix})`)
    expect(error.fix).toMatch(
      /^npm install @tensorlane\/transport-gloo-linux-x64-gnu@0\.1\.0 \(the prebuilt addon for linux-x64-gnu\), or npx -p @tensorlane\/cli tensorlane build gloo \(a source build into .*; needs cmake and a C\+\+ compiler, libgloo-dev \(sudo apt-get install libgloo-dev\)\), or, in the repository .*: bash tools\/setup\.sh$/,
    )
  })

  it("names libgloo, what dlopen said and the fix when the library is missing", async () => {
    const error = refusal(await statusWith(withoutLibgloo()))
    expect(error.library).toBe("libgloo.so.0")
    expect(error.message).toMatch(
      /^libgloo\.so\.0 \(Gloo, Debian package libgloo0\) cannot be loaded by the gloo addon: .*libgloo\.so\.9: cannot open shared object file.*Fix: sudo apt-get install libgloo0 for the addon built against the system's libgloo, or npm install @tensorlane\/transport-gloo-linux-x64-gnu@0\.1\.0/,
    )
  })

  it("says a file that is no addon cannot be loaded, and how to get one", async () => {
    const garbage = join(scratch, "garbage.node")
    fs.writeFileSync(garbage, "not an ELF file")
    const error = refusal(await statusWith(garbage))
    expect(error.message).toMatch(new RegExp(`^the @tensorlane/transport-gloo addon cannot be loaded: ${garbage}: .*Tried: ${garbage}\\. Fix: npm install @tensorlane/transport-gloo-linux-x64-gnu@0\\.1\\.0 `))
  })
})
