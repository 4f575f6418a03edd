/**
 * `tensorlane doctor` on this machine (gloo and nixl ready: tools/setup.sh installs libgloo-dev and
 * the nixl-cu12 wheel; no GPU); the transport packages it discovers by their `"tensorlane"` field
 * (the repository's fixtures and example, a package of a project elsewhere); and each state the
 * doctor can report, on test-double packages written into packages/cli/node_modules for the
 * duration of the test.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type DoctorReport, probePackage } from "../src/Doctor.ts"
import { type TransportPackage, discoverPackages } from "../src/Packages.ts"
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
const doubles: Record<string, { readonly source: string; readonly field: unknown }> = {
  "missing-library": {
    source: `import { NativeLibraryError } from "@tensorlane/core"
export const status = () => { throw new NativeLibraryError({ message: "libfake.so cannot be loaded", library: "libfake.so", tried: ["/opt/fake/libfake.so", "libfake.so"], fix: "install fake" }) }`,
    field: { transport: "missing-library", kind: "cpu", status: "status", addon: "tensorlane_fake.node", libraries: ["libfake.so"] },
  },
  "no-details": {
    source: `export const status = () => ({ ready: false, library: undefined, error: "the addon is not built" })`,
    field: { transport: "no-details", kind: "cpu", status: "status" },
  },
  "gpu-library": {
    source: `export const status = () => ({ version: "2.27.3", devices: 0, details: [["nccl", "2.27.3 at /opt/nccl/libnccl.so.2"], ["devices", "0"]] })`,
    field: { transport: "gpu-library", kind: "gpu", status: "status" },
  },
  "no-status": { source: `export const other = 1`, field: { transport: "no-status", kind: "cpu", status: "status" } },
  throws: { source: `export const status = () => { throw new Error("boom") }`, field: { transport: "throws", kind: "cpu", status: "status" } },
  "plain-transport": {
    source: `export const plain = { name: "plain-transport", capabilities: { oneSided: true, needsGroup: false, devices: ["cpu"] } }`,
    field: { transport: "plain-transport", kind: "cpu" },
  },
  "other-transport": {
    source: `export const plain = { name: "something-else", capabilities: { oneSided: true, needsGroup: false, devices: ["cpu"] } }`,
    field: { transport: "other-transport", kind: "cpu" },
  },
  "bad-kind": { source: `export {}`, field: { transport: "bad-kind", kind: "tpu" } },
}

const writePackage = (dir: string, name: string, source: string, field: unknown): void => {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(join(dir, "package.json"), JSON.stringify({ name, version: "9.9.9", type: "module", exports: { ".": { import: "./index.js" } }, tensorlane: field }))
  fs.writeFileSync(join(dir, "index.js"), source)
}

describe("doctor states (test-double packages)", () => {
  let found: Map<string, TransportPackage>
  beforeAll(() => {
    for (const [name, { source, field }] of Object.entries(doubles)) writePackage(join(scope, name), `@tensorlane-test/${name}`, source, field)
    found = new Map(discoverPackages([fileURLToPath(new URL("..", import.meta.url))]).packages.map((p) => [p.packageName, p]))
  })
  afterAll(() => fs.rmSync(hadNodeModules ? scope : nodeModules, { recursive: true, force: true }))

  const probe = (name: string, hasGpu = false) => probePackage(found.get(`@tensorlane-test/${name}`)!, hasGpu)

  it("a NativeLibraryError is a missing library, with every path tried, its fix and what the field says the package loads", async () => {
    const report = await probe("missing-library")
    expect(report).toMatchObject({
      state: "missing library",
      version: "9.9.9",
      reason: "libfake.so cannot be loaded",
      tried: ["/opt/fake/libfake.so", "libfake.so"],
      fix: "install fake",
      needs: ["tensorlane_fake.node", "libfake.so"],
    })
    expect(report.location).toBe(join(scope, "missing-library"))
  })

  it("a status outside core's PackageStatus contract (no details) is an error that names the contract", async () => {
    expect(await probe("no-details")).toMatchObject({ state: "error", reason: "status returned no details (core's PackageStatus)" })
  })

  it("a GPU-only package whose library loads is 'no GPU' without a GPU and ready with one, with the status's details in order", async () => {
    const without = await probe("gpu-library")
    expect(without.state).toBe("no GPU")
    expect(without.details).toEqual([
      ["nccl", "2.27.3 at /opt/nccl/libnccl.so.2"],
      ["devices", "0"],
    ])
    expect((await probe("gpu-library", true)).state).toBe("ready")
  })

  it("a package without the status export, or whose status throws, is an error that says so", async () => {
    expect(await probe("no-status")).toMatchObject({ state: "error", reason: `@tensorlane-test/no-status exports no status function (its "tensorlane" field's status)` })
    expect(await probe("throws")).toMatchObject({ state: "error", reason: "boom" })
  })

  it("without a status export, a package is ready when it exports the transport its field names, and an error otherwise", async () => {
    expect(await probe("plain-transport")).toMatchObject({ state: "ready", details: [["module", join(scope, "plain-transport", "index.js")]] })
    expect(await probe("other-transport")).toMatchObject({ state: "error", reason: `@tensorlane-test/other-transport exports no transport named other-transport (its "tensorlane" field)` })
  })

  it("a field the doctor cannot use is reported with what is wrong, not skipped", () => {
    const { invalid } = discoverPackages([fileURLToPath(new URL("..", import.meta.url))])
    expect(invalid.find((p) => p.packageName === "@tensorlane-test/bad-kind")).toMatchObject({ reason: `"tensorlane.kind" must be "cpu" or "gpu", not "tpu"` })
  })
})

describe("transport packages are discovered, not listed in the CLI", () => {
  const project = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-doctor-project-"))
  afterAll(() => fs.rmSync(project, { recursive: true, force: true }))

  it("the repository's third-party transports (its fixtures, examples/transport-tcp) are in the doctor's report", async () => {
    const text = await tensorlane(["doctor"])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^tcp\s+ready\s+@tensorlane-examples\/transport-tcp 0\.0\.0 at \S+examples\/transport-tcp$/m)
    const { stdout } = await tensorlane(["doctor", "--json"])
    const states = new Map((JSON.parse(stdout) as DoctorReport).packages.map((p) => [p.packageName, [p.transport, p.state]]))
    expect(states.get("@tensorlane-examples/transport-tcp")).toEqual(["tcp", "ready"])
    expect(states.get("@tensorlane-fixtures/transport-tmpfile")).toEqual(["tmpfile", "ready"])
    expect(states.get("@tensorlane-fixtures/transport-socketpair")).toEqual(["socketpair", "ready"])
  })

  it("a package in the node_modules of the project the command runs in is found, with its field checked", async () => {
    writePackage(join(project, "node_modules", "tensorlane-transport-echo"), "tensorlane-transport-echo", `export const echo = { name: "echo", capabilities: { oneSided: true, needsGroup: false, devices: ["cpu"] } }`, { transport: "echo", kind: "cpu" })
    writePackage(join(project, "node_modules", "@someone", "broken"), "@someone/broken", `export {}`, { kind: "cpu" })
    writePackage(join(project, "node_modules", "not-a-transport"), "not-a-transport", `export {}`, undefined)
    const { code, stdout } = await tensorlane(["doctor", "--json"], process.env, project)
    expect(code).toBe(0)
    const report = JSON.parse(stdout) as DoctorReport
    expect(report.searched[0]).toBe(join(fs.realpathSync(project), "node_modules"))
    const byName = new Map(report.packages.map((p) => [p.packageName, p]))
    expect(byName.get("tensorlane-transport-echo")).toMatchObject({ transport: "echo", state: "ready", location: join(fs.realpathSync(project), "node_modules", "tensorlane-transport-echo") })
    expect(byName.get("@someone/broken")).toMatchObject({ state: "error", reason: `"tensorlane.transport" must be a transport name (lowercase), not undefined` })
    expect(byName.has("not-a-transport")).toBe(false)
    // The command's own install is searched too: the repository's packages are there.
    expect(byName.get("@tensorlane/transport-gloo")?.state).toBe("ready")
  })
})
