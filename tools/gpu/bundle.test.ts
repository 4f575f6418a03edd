/**
 * The GPU check bundle's dry mode (bundle.ts): the bundle builds within its size limit, starts here
 * from its own Node, and reports the lack of a GPU cleanly: the check that needs none passes, the
 * others are skipped, nothing fails. Needs the Node binary that tools/setup.sh fetches
 * (fetch-node.sh); skipped, with the reason printed, when neither that cache nor the registry has it.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type BundleInfo, type DryRun, SIZE_LIMIT, buildBundle, nodeArchive, startDry } from "./bundle.ts"
import { CHECKS } from "./check.ts"

const missingNode = (() => {
  try {
    nodeArchive()
    return undefined
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
})()
if (missingNode !== undefined) console.warn(`skipping the GPU bundle's dry run: no Node binary for it (${missingNode})`)

describe.skipIf(missingNode !== undefined)("the GPU check bundle, dry", () => {
  let dir: string
  let info: BundleInfo
  let dry: DryRun

  beforeAll(() => {
    dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-gpu-bundle-test-"))
    info = buildBundle(dir)
    dry = startDry(dir)
  }, 110_000)

  afterAll(() => {
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  })

  it("is well under what a device run carries, Node compressed with xz", () => {
    expect(info.bytes).toBeLessThanOrEqual(SIZE_LIMIT)
    expect(Object.keys(info.files).sort()).toEqual(["app.tar.xz", "node.xz", "run.sh"])
    expect(fs.readFileSync(join(dir, "node.xz")).subarray(0, 6)).toEqual(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))
  })

  it("starts its own Node 24 and runs the checks that need no GPU", () => {
    expect(dry.output).toMatch(/^node v24\.\d+\.\d+ from the bundle/m)
    expect(dry.report?.host.node).toBe(info.node)
    expect(dry.report?.checks.map((c) => c.name)).toEqual(Object.keys(CHECKS))
    const runtime = dry.report?.checks.find((c) => c.name === "runtime")
    expect(runtime).toMatchObject({ status: "pass", facts: { actorSum: 4950 } })
    expect(Object.keys(runtime!.facts.addonExports as object).sort()).toEqual(["tensorlane_nccl.node", "tensorlane_nixl.node", "tensorlane_symmetric.node"])
  })

  it("reports no GPU cleanly: the GPU checks skipped, nothing failed, one summary line, exit code 0", () => {
    expect(dry.report).toMatchObject({ dry: true, gpu: false, summary: { failed: 0, passed: 1, skipped: Object.keys(CHECKS).length - 1 } })
    for (const c of dry.report!.checks.filter((c) => CHECKS[c.name].gpu)) expect(c).toMatchObject({ status: "skip", reason: "dry run" })
    expect(dry.status).toBe(0)
    expect(dry.output).toMatch(/^tensorlane gpu check: 1 passed, 0 failed, \d+ skipped; no GPU \(dry run\);/m)
  })
})
