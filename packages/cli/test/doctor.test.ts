/**
 * `tensorlane doctor` on this machine (gloo and nixl ready: tools/setup.sh installs libgloo-dev and
 * the nixl-cu12 wheel; no GPU), and each state the doctor can report, on test-double packages
 * written into packages/cli/node_modules for the duration of the test.
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DoctorReport, probePackage } from "../src/Doctor.ts"
import type { PackageEntry } from "../src/Packages.ts"
import { tensorlane } from "./cli.ts"

describe("tensorlane doctor on this machine", () => {
  it("prints every transport with its state, the libraries and the UCX transports NIXL sees", async () => {
    const { code, stdout } = await tensorlane(["doctor"])
    expect(code).toBe(0)
    expect(stdout).toMatch(/^object-store\s+ready\s+@tensorlane\/core \(built in\)$/m)
    expect(stdout).toMatch(/^gloo\s+ready\s+@tensorlane\/transport-gloo 0\.1\.0 at \S+$/m)
    expect(stdout).toMatch(/^ {4}gloo: \S+ at \S*libgloo\.so\S*$/m)
    expect(stdout).toMatch(/^nixl\s+ready\s+@tensorlane\/transport-nixl 0\.1\.0 at \S+$/m)
    expect(stdout).toMatch(/^ {4}libnixl_capi: \S+libnixl_capi\.so \(wheel nixl-cu12 1\.5\.1\)$/m)
    // Not merged yet, or merged and without a GPU here.
    expect(stdout).toMatch(/^nccl\s+(not installed|no GPU)\s+@tensorlane\/transport-nccl/m)
    expect(stdout).toMatch(/^UCX \d+\.\d+\.\d+ as NIXL loads it, from \S+libucp\S*$/m)
    expect(stdout).toMatch(/^ {2}tcp\s+tcp\s+.*\blo\b/m)
  })

  it("--json gives the same facts as data", async () => {
    const { code, stdout } = await tensorlane(["doctor", "--json"])
    expect(code).toBe(0)
    const report = JSON.parse(stdout) as DoctorReport
    expect(report.gpus).toEqual([])
    const byName = new Map(report.packages.map((p) => [p.packageName, p]))
    const gloo = byName.get("@tensorlane/transport-gloo")!
    expect(gloo.state).toBe("ready")
    const glooLibrary = /at (\S+)$/.exec(new Map(gloo.details).get("gloo")!)![1]
    expect(fs.existsSync(glooLibrary)).toBe(true)
    const nixl = byName.get("@tensorlane/transport-nixl")!
    expect(nixl.state).toBe("ready")
    expect(fs.existsSync(new Map(nixl.details).get("libnixl_capi")!.split(" ")[0])).toBe(true)
    expect(["not installed", "no GPU"]).toContain(byName.get("@tensorlane/transport-nccl")!.state)
    expect(["not installed", "ready"]).toContain(byName.get("@tensorlane/symmetric-mem")!.state)
    const ucx = report.ucx as Exclude<DoctorReport["ucx"], { error: string } | undefined>
    expect(ucx.version).toMatch(/^\d+\.\d+\.\d+$/)
    expect(fs.existsSync(ucx.library!)).toBe(true)
    const tcp = ucx.transports.find((t) => t.transport === "tcp")
    expect(tcp?.enabled).toBe(true)
    expect(tcp?.devices).toContain("lo")
    // Same-host transports UCX uses between two processes.
    expect(ucx.transports.some((t) => ["cma", "posix", "sysv"].includes(t.transport) && t.enabled)).toBe(true)
  })
})

// Test doubles: packages shaped like transport packages, whose status functions fail in each way.
const nodeModules = fileURLToPath(new URL("../node_modules", import.meta.url))
const scope = join(nodeModules, "@tensorlane-test")
const hadNodeModules = fs.existsSync(nodeModules)
const doubles: Record<string, string> = {
  "missing-library": `import { NativeLibraryError } from "@tensorlane/core"
export const status = () => { throw new NativeLibraryError({ message: "libfake.so cannot be loaded", library: "libfake.so", tried: ["/opt/fake/libfake.so", "libfake.so"], fix: "install fake" }) }`,
  "no-details": `export const status = () => ({ ready: false, library: undefined, error: "the addon is not built" })`,
  "gpu-library": `export const status = () => ({ version: "2.27.3", devices: 0, details: [["nccl", "2.27.3 at /opt/nccl/libnccl.so.2"], ["devices", "0"]] })`,
  "no-status": `export const other = 1`,
  "throws": `export const status = () => { throw new Error("boom") }`,
}

const entry = (name: string, gpuOnly = false): PackageEntry => ({
  packageName: `@tensorlane-test/${name}`,
  transports: [name],
  statusExport: "status",
  gpuOnly,
  fix: `npm install @tensorlane-test/${name}`,
})

describe("doctor states (test-double packages)", () => {
  beforeAll(() => {
    for (const [name, source] of Object.entries(doubles)) {
      const dir = join(scope, name)
      fs.mkdirSync(dir, { recursive: true })
      fs.writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `@tensorlane-test/${name}`, version: "9.9.9", type: "module", exports: "./index.js" }))
      fs.writeFileSync(join(dir, "index.js"), source)
    }
  })
  afterAll(() => fs.rmSync(hadNodeModules ? scope : nodeModules, { recursive: true, force: true }))

  it("a package that does not resolve is not installed, with the fix", async () => {
    expect(await probePackage(entry("absent"), false)).toMatchObject({ state: "not installed", fix: "npm install @tensorlane-test/absent" })
  })

  it("a NativeLibraryError is a missing library, with every path tried and its fix", async () => {
    const report = await probePackage(entry("missing-library"), false)
    expect(report).toMatchObject({
      state: "missing library",
      version: "9.9.9",
      reason: "libfake.so cannot be loaded",
      tried: ["/opt/fake/libfake.so", "libfake.so"],
      fix: "install fake",
    })
    expect(report.location).toBe(join(scope, "missing-library"))
  })

  it("a status outside core's PackageStatus contract (no details) is an error that names the contract", async () => {
    expect(await probePackage(entry("no-details"), false)).toMatchObject({
      state: "error",
      reason: "status returned no details (core's PackageStatus)",
    })
  })

  it("a GPU-only package whose library loads is 'no GPU' without a GPU and ready with one, with the status's details in order", async () => {
    const without = await probePackage(entry("gpu-library", true), false)
    expect(without.state).toBe("no GPU")
    expect(without.details).toEqual([
      ["nccl", "2.27.3 at /opt/nccl/libnccl.so.2"],
      ["devices", "0"],
    ])
    expect((await probePackage(entry("gpu-library", true), true)).state).toBe("ready")
  })

  it("a package without the status export, or whose status throws, is an error that says so", async () => {
    expect(await probePackage(entry("no-status"), false)).toMatchObject({
      state: "error",
      reason: "@tensorlane-test/no-status exports no status function",
    })
    expect(await probePackage(entry("throws"), false)).toMatchObject({ state: "error", reason: "boom" })
  })
})
