/**
 * `tensorlane build <transport>` as a user runs it: in an app outside the repository that has the
 * transport from its npm tarball and no platform package, it builds the addon from the tarball's
 * sources into $XDG_CACHE_HOME/tensorlane, where the transport's loader then finds it; on a machine
 * without cmake, a compiler or libgloo-dev it names each with its fix.
 */
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAIN } from "./cli.ts"

const run = promisify(execFile)
const repo = fileURLToPath(new URL("../../../", import.meta.url))
const scratch = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-build-"))
const app = join(scratch, "app")
const cache = join(scratch, "cache")

/** Runs the built command in `cwd`; its exit code and output, never a rejection. */
const tensorlane = async (args: ReadonlyArray<string>, options: { cwd: string; env?: NodeJS.ProcessEnv; wrap?: ReadonlyArray<string> }) => {
  const [command, ...prefix] = [...(options.wrap ?? []), process.execPath]
  try {
    const { stdout, stderr } = await run(command, [...prefix, MAIN, ...args], { cwd: options.cwd, env: options.env ?? process.env, timeout: 600_000, maxBuffer: 16 << 20 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    return { code: failed.code ?? -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" }
  }
}

beforeAll(() => {
  // The app has the transport as npm unpacks its tarball, beside core and effect; nothing else.
  const modules = join(app, "node_modules")
  fs.mkdirSync(join(modules, "@tensorlane", "transport-gloo"), { recursive: true })
  fs.writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }))
  const tarball = execFileSync("npm", ["pack", "--ignore-scripts", "--pack-destination", scratch], { cwd: join(repo, "packages", "transport-gloo"), encoding: "utf8" }).trim().split("\n").at(-1)!
  execFileSync("tar", ["-xzf", join(scratch, tarball), "-C", join(modules, "@tensorlane", "transport-gloo"), "--strip-components=1"])
  fs.symlinkSync(join(repo, "packages", "core"), join(modules, "@tensorlane", "core"))
  fs.symlinkSync(join(repo, "node_modules", "effect"), join(modules, "effect"))
})

afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** What glooStatus() gives, or the facts of what it threw, in a fresh process of the app. */
const glooStatusInApp = async (): Promise<Record<string, unknown>> => {
  const program = `const { glooStatus } = await import("@tensorlane/transport-gloo")
    try { console.log(JSON.stringify(glooStatus())) } catch (e) { console.log(JSON.stringify({ tag: e._tag, tried: e.tried, fix: e.fix })) }`
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", program], { cwd: app, env: { ...process.env, XDG_CACHE_HOME: cache } })
  return JSON.parse(stdout) as Record<string, unknown>
}

describe("tensorlane build", () => {
  it("builds gloo from the tarball's sources into the user cache, where the loader finds it with no platform package installed", { timeout: 600_000 }, async () => {
    const addon = join(cache, "tensorlane", "addons", "tensorlane-transport-gloo@0.1.0", "linux-x64", "tensorlane_gloo.node")
    const before = await glooStatusInApp()
    expect(before).toMatchObject({ tag: "NativeLibraryError", fix: expect.stringMatching(/^npm install @tensorlane\/transport-gloo-linux-x64-gnu@0\.1\.0 .*, or npx -p @tensorlane\/cli tensorlane build gloo /) })
    expect(before.tried).toEqual([
      "@tensorlane/transport-gloo-linux-x64-gnu/tensorlane_gloo.node (not installed)",
      addon,
      ...["Release", "Debug"].map((config) => join(app, "node_modules", "@tensorlane", "transport-gloo", "build", config, "tensorlane_gloo.node")),
    ])
    const { code, stdout, stderr } = await tensorlane(["build", "gloo"], { cwd: app, env: { ...process.env, XDG_CACHE_HOME: cache } })
    expect({ code, stdout }, stderr).toEqual({ code: 0, stdout: `built @tensorlane/transport-gloo@0.1.0: ${addon}\n` })
    // Only the addon stays: cmake's work folder is gone, and nothing was written into node_modules.
    expect(fs.readdirSync(join(cache, "tensorlane", "addons", "tensorlane-transport-gloo@0.1.0"))).toEqual(["linux-x64"])
    expect(fs.readdirSync(join(cache, "tensorlane", "addons", "tensorlane-transport-gloo@0.1.0", "linux-x64"))).toEqual(["tensorlane_gloo.node"])
    expect(fs.existsSync(join(app, "node_modules", "@tensorlane", "transport-gloo", "build"))).toBe(false)
    expect(await glooStatusInApp()).toMatchObject({ addon, library: expect.stringMatching(/libgloo\.so/) })
  })

  it("names cmake, the compiler, make and libgloo-dev with their fixes when this machine lacks them", async () => {
    // PATH holds node alone, and Gloo's headers are hidden in a mount namespace of the command's own.
    const bin = join(scratch, "bin")
    fs.mkdirSync(bin, { recursive: true })
    fs.symlinkSync(process.execPath, join(bin, "node"))
    const { code, stderr } = await tensorlane(["build", "gloo"], {
      cwd: app,
      env: { PATH: bin, HOME: scratch, XDG_CACHE_HOME: cache },
      wrap: ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", '/bin/mount -t tmpfs none /usr/include/gloo && exec "$@"', "sh"],
    })
    expect(code).toBe(2)
    expect(stderr).toBe(
      [
        "BuildError: building @tensorlane/transport-gloo needs what this machine lacks:",
        "  cmake (3.16 or newer): sudo apt-get install cmake, or pip install cmake",
        "  a C++17 compiler (c++, g++, clang++ not found): sudo apt-get install g++, or set CXX",
        "  make or ninja: sudo apt-get install make",
        "  gloo/config.h (Gloo's headers and library: sudo apt-get install libgloo-dev (Debian, Ubuntu))",
        "",
      ].join("\n"),
    )
  })

  it("says where the user cache cannot be written", async () => {
    const file = join(scratch, "not-a-folder")
    fs.writeFileSync(file, "")
    const { code, stderr } = await tensorlane(["build", "gloo"], { cwd: app, env: { ...process.env, XDG_CACHE_HOME: file } })
    expect(code).toBe(2)
    expect(stderr).toMatch(new RegExp(`^BuildError: cannot write the user cache at ${file}/tensorlane/addons/tensorlane-transport-gloo@0\\.1\\.0 \\(set XDG_CACHE_HOME to a writable folder\\): ENOTDIR`))
  })

  it("refuses an unknown transport and a package that is not installed", async () => {
    const unknown = await tensorlane(["build", "carrier-pigeon"], { cwd: app })
    expect(unknown).toMatchObject({ code: 2, stderr: "UsageError: tensorlane build carrier-pigeon: unknown transport; one of gloo, nixl, nccl, symmetric-mem, or a package name\n" })
    const absent = await tensorlane(["build", "nixl"], { cwd: app })
    expect(absent).toMatchObject({ code: 2, stderr: `BuildError: @tensorlane/transport-nixl is not installed where ${app} imports it from: npm install @tensorlane/transport-nixl\n` })
  })
})
