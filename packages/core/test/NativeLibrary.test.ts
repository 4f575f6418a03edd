/**
 * A package's addon (core's nativeAddon), the search for the shared libraries addons dlopen
 * (libraryCandidates / loadNativeLibrary), and both derived from a package's name (nativePackage).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { type NativeLibrarySpec, type RuntimeWheel, libraryCandidates, loadNativeLibrary, nativeAddon } from "../src/NativeAddon.js"
import { nativePackage } from "../src/NativePackage.js"
import { thrown } from "./helpers/errors.ts"

const ENV = "TENSORLANE_TEST_LIBRARY_OVERRIDE"

const wheel: RuntimeWheel = {
  name: "example-cu12",
  version: "1.2.3",
  url: "https://files.example.org/example_cu12-1.2.3-py3-none-any.whl",
  bytes: 1,
  sha256: "0".repeat(64),
  libraries: [/^example\/lib\//],
}

const spec = (names: "folder" | "file", moduleUrl = import.meta.url): NativeLibrarySpec => ({
  library: "libexample.so.1",
  description: "the example library (libexample.so.1)",
  packageName: "@tensorlane/core",
  moduleUrl,
  override: { env: ENV, names },
  install: "example",
  wheel,
  path: "example/lib/libexample.so.1",
  sitePaths: ["example/lib/libexample.so.1", "example_cu13/lib/libexample.so.1"],
  systemNames: ["libexample.so.1", "libexample.so"],
})

const REPO = join(import.meta.dirname, "..", "..", "..")
const FIX_IN_CHECKOUT = `npx -p @tensorlane/cli tensorlane install example, or, in the repository ${REPO}: bash tools/setup.sh, or point ${ENV} at the folder that holds libexample.so.1`

const xdgCacheHome = process.env.XDG_CACHE_HOME

afterEach(() => {
  delete process.env[ENV]
  delete process.env.TENSORLANE_EXAMPLE_ADDON
  if (xdgCacheHome === undefined) delete process.env.XDG_CACHE_HOME
  else process.env.XDG_CACHE_HOME = xdgCacheHome
})

describe("a package's addon", () => {
  const savedCache = process.env.XDG_CACHE_HOME
  let scratch: string

  beforeEach(() => {
    scratch = fs.mkdtempSync(join(os.tmpdir(), "native-addon-"))
    process.env.XDG_CACHE_HOME = join(scratch, "cache")
  })

  afterEach(() => {
    if (savedCache === undefined) delete process.env.XDG_CACHE_HOME
    else process.env.XDG_CACHE_HOME = savedCache
    fs.rmSync(scratch, { recursive: true, force: true })
  })

  /** A package @example/transport-demo at 1.2.3 in `root`, with a prebuilt platform package for this machine as an optional dependency. */
  const demoPackage = (root: string) => {
    fs.mkdirSync(join(root, "dist"), { recursive: true })
    const manifest = { name: "@example/transport-demo", version: "1.2.3", optionalDependencies: { "@example/transport-demo-linux-x64-gnu": "1.2.3" } }
    fs.writeFileSync(join(root, "package.json"), JSON.stringify(manifest))
    return nativeAddon<object>({ packageName: "@example/transport-demo", moduleUrl: pathToFileURL(join(root, "dist", "index.js")).href, name: "demo", buildNeeds: "libdemo-dev" })
  }
  const cached = () => join(scratch, "cache", "tensorlane", "addons", "example-transport-demo@1.2.3", "linux-x64", "tensorlane_demo.node")

  it("is the platform package, then the user cache's source build, then the package's Release and Debug build, or TENSORLANE_<NAME>_ADDON alone", () => {
    const root = join(scratch, "app", "node_modules", "@example", "transport-demo")
    const addon = demoPackage(root)
    const platform = join(scratch, "app", "node_modules", "@example", "transport-demo-linux-x64-gnu")
    fs.mkdirSync(platform, { recursive: true })
    fs.writeFileSync(join(platform, "package.json"), JSON.stringify({ name: "@example/transport-demo-linux-x64-gnu", version: "1.2.3" }))
    const builds = (root: string) => [join(root, "build", "Release", "tensorlane_demo.node"), join(root, "build", "Debug", "tensorlane_demo.node")]
    expect(addon.candidates()).toEqual([join(platform, "tensorlane_demo.node"), cached(), ...builds(root)])
    const alone = join(scratch, "other", "node_modules", "@example", "transport-demo")
    expect(demoPackage(alone).candidates()).toEqual(["@example/transport-demo-linux-x64-gnu/tensorlane_demo.node (not installed)", cached(), ...builds(alone)])
    process.env.TENSORLANE_DEMO_ADDON = "/opt/mine/tensorlane_demo.node"
    expect(addon.candidates()).toEqual(["/opt/mine/tensorlane_demo.node"])
    delete process.env.TENSORLANE_DEMO_ADDON
  })

  it("is loaded on first use; one that is nowhere is a NativeLibraryError with every candidate and fixes that work outside the repository", () => {
    const addon = demoPackage(join(scratch, "app", "node_modules", "@example", "transport-demo"))
    expect(addon.loaded()).toBeUndefined()
    const fix = `npm install @example/transport-demo-linux-x64-gnu@1.2.3 (the prebuilt addon for linux-x64-gnu), or npx -p @tensorlane/cli tensorlane build @example/transport-demo (a source build into ${dirname(cached())}; needs cmake and a C++ compiler, libdemo-dev)`
    expect(thrown(() => addon.load())).toMatchObject({
      _tag: "NativeLibraryError",
      library: "tensorlane_demo.node",
      tried: addon.candidates(),
      fix,
      message: `the @example/transport-demo addon is not installed: no tensorlane_demo.node at ${addon.candidates().join(", ")}. Fix: ${fix}`,
    })
    expect(addon.loaded()).toBeUndefined()
  })

  it("names the repository's setup only in a checkout, and only a source build where no platform package is published", () => {
    fs.mkdirSync(join(scratch, "repo", "tools"), { recursive: true })
    fs.writeFileSync(join(scratch, "repo", "tools", "setup.sh"), "")
    const addon = nativeAddon<object>({ packageName: "@tensorlane/core", moduleUrl: import.meta.url, name: "example" })
    const inCheckout = nativeAddon<object>({ packageName: "@tensorlane/transport-demo", moduleUrl: pathToFileURL(join(scratch, "repo", "packages", "demo", "dist", "index.js")).href, name: "demo" })
    fs.mkdirSync(join(scratch, "repo", "packages", "demo", "dist"), { recursive: true })
    fs.writeFileSync(join(scratch, "repo", "packages", "demo", "package.json"), JSON.stringify({ name: "@tensorlane/transport-demo", version: "0.3.0" }))
    const repo = join(import.meta.dirname, "..", "..", "..")
    expect(thrown(() => addon.load())).toMatchObject({
      fix: `no prebuilt addon for linux-x64-gnu: npx -p @tensorlane/cli tensorlane build core (a source build into ${join(scratch, "cache", "tensorlane", "addons", "tensorlane-core@0.1.0", "linux-x64")}; needs cmake and a C++ compiler), or, in the repository ${repo}: bash tools/setup.sh`,
    })
    expect(thrown(() => inCheckout.load())).toMatchObject({
      fix: expect.stringMatching(/^no prebuilt addon for linux-x64-gnu: npx -p @tensorlane\/cli tensorlane build demo .*, or, in the repository .*\/repo: bash tools\/setup\.sh$/),
    })
  })
})

describe("native library search", () => {
  it("tries the override folder, the user cache, .tools/libraries in every ancestor of the package and of the cwd, then the system names", () => {
    process.env[ENV] = "/opt/example"
    process.env.XDG_CACHE_HOME = "/var/cache/someone"
    const candidates = libraryCandidates(spec("folder"))
    const inWheel = join("example_cu12-1.2.3", "example", "lib", "libexample.so.1")
    expect(candidates.slice(0, 2)).toEqual(["/opt/example/libexample.so.1", join("/var/cache/someone/tensorlane/libraries", inWheel)])
    const repo = join(import.meta.dirname, "..", "..", "..")
    expect(candidates[2]).toBe(join(import.meta.dirname, "..", ".tools", "libraries", inWheel))
    expect(candidates).toContain(join(repo, ".tools", "libraries", inWheel))
    expect(candidates).toContain(join("/", ".tools", "libraries", inWheel))
    expect(candidates.slice(-2)).toEqual(["libexample.so.1", "libexample.so"])
    expect(new Set(candidates).size).toBe(candidates.length)
  })

  it("a file override is the only candidate", () => {
    process.env[ENV] = "/opt/mine/libexample.so.1"
    expect(libraryCandidates(spec("file"))).toEqual(["/opt/mine/libexample.so.1"])
  })

  it("loads the first candidate that exists and loads; else NativeLibraryError names every path, each failure and the fix", () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "native-library-"))
    try {
      fs.writeFileSync(join(dir, "libexample.so.1"), "")
      process.env[ENV] = dir
      const attempts: Array<string> = []
      expect(loadNativeLibrary(spec("folder"), (path) => (attempts.push(path), 7))).toEqual({ loaded: 7, path: join(dir, "libexample.so.1") })
      const error = thrown(() =>
        loadNativeLibrary(spec("folder"), (path) => {
          throw new Error(`dlopen ${path} failed`)
        }),
      )
      expect(error).toMatchObject({
        _tag: "NativeLibraryError",
        library: "libexample.so.1",
        fix: FIX_IN_CHECKOUT,
        tried: libraryCandidates(spec("folder")),
        message: expect.stringMatching(/^the example library \(libexample\.so\.1\) cannot be loaded\. Tried: .*dlopen .*libexample\.so\.1 failed.*dlopen libexample\.so failed.*Fix: npx -p @tensorlane\/cli tensorlane install example, /),
      })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("is found where `npx tensorlane install` unpacks its wheel, in the user cache", () => {
    const cache = fs.mkdtempSync(join(os.tmpdir(), "native-library-cache-"))
    try {
      process.env.XDG_CACHE_HOME = cache
      const installed = join(cache, "tensorlane", "libraries", "example_cu12-1.2.3", "example", "lib", "libexample.so.1")
      fs.mkdirSync(join(installed, ".."), { recursive: true })
      fs.writeFileSync(installed, "")
      expect(loadNativeLibrary(spec("folder"), (path) => path)).toEqual({ loaded: installed, path: installed })
    } finally {
      fs.rmSync(cache, { recursive: true, force: true })
    }
  })

  it("asks Python for its site-packages only once no earlier candidate loaded", () => {
    // A fresh process (the answer is kept per thread) whose python3 leaves a mark when it runs.
    const dir = fs.mkdtempSync(join(os.tmpdir(), "native-library-python-"))
    try {
      const mark = join(dir, "python-ran")
      fs.mkdirSync(join(dir, "bin"))
      fs.writeFileSync(join(dir, "bin", "python3"), `#!/bin/sh\ntouch ${mark}\n`, { mode: 0o755 })
      fs.writeFileSync(join(dir, "libexample.so.1"), "")
      const script = `
        import { loadNativeLibrary, libraryCandidates } from "@tensorlane/core/native"
        import * as fs from "node:fs"
        const spec = ${JSON.stringify(spec("folder"))}
        const found = loadNativeLibrary(spec, (path) => path).path
        const before = fs.existsSync(${JSON.stringify(mark)})
        libraryCandidates(spec)
        console.log(JSON.stringify({ found, before, after: fs.existsSync(${JSON.stringify(mark)}) }))`
      const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
        cwd: import.meta.dirname,
        env: { ...process.env, [ENV]: dir, PATH: `${join(dir, "bin")}:${process.env.PATH}` },
        encoding: "utf8",
      })
      expect(JSON.parse(out)).toEqual({ found: join(dir, "libexample.so.1"), before: false, after: true })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("names the install command, and the setup script only when the package runs from the repository's checkout", () => {
    const outside = fs.mkdtempSync(join(os.tmpdir(), "native-library-outside-"))
    try {
      const fail = (moduleUrl: string) => thrown(() => loadNativeLibrary(spec("file", moduleUrl), () => {
        throw new Error("no")
      }))
      process.env[ENV] = "/nowhere/libexample.so.1"
      expect(fail(import.meta.url)).toMatchObject({ fix: `npx -p @tensorlane/cli tensorlane install example, or, in the repository ${REPO}: bash tools/setup.sh, or set ${ENV} to the path of a libexample.so.1` })
      expect(fail(pathToFileURL(join(outside, "index.js")).href)).toMatchObject({ fix: `npx -p @tensorlane/cli tensorlane install example, or set ${ENV} to the path of a libexample.so.1` })
    } finally {
      fs.rmSync(outside, { recursive: true, force: true })
    }
  })
})

describe("nativePackage", () => {
  const override = { env: "TENSORLANE_TEST_EXAMPLE_LIBRARY", names: "file" } as const

  it("names the addon and the install target by the package's short name", () => {
    const native = nativePackage({ packageName: "@example/transport-demo", moduleUrl: import.meta.url })
    process.env.TENSORLANE_DEMO_ADDON = "/opt/mine/tensorlane_demo.node"
    try {
      expect(native.addon<object>().candidates()).toEqual(["/opt/mine/tensorlane_demo.node"])
    } finally {
      delete process.env.TENSORLANE_DEMO_ADDON
    }
    expect(native.library({ library: "libexample.so.1", wheel, folder: "example/lib", override })).toEqual({
      library: "libexample.so.1",
      packageName: "@example/transport-demo",
      moduleUrl: import.meta.url,
      override,
      install: "demo",
      wheel,
      path: "example/lib/libexample.so.1",
      sitePaths: ["example/lib/libexample.so.1"],
      systemNames: ["libexample.so.1"],
    })
  })

  it("takes the addon's and the install target's names where they differ, a description, sibling builds' paths and more system names", () => {
    const native = nativePackage({ packageName: "@tensorlane/symmetric-mem", moduleUrl: import.meta.url, addon: "symmetric", install: "example" })
    process.env.TENSORLANE_SYMMETRIC_ADDON = "/opt/mine/tensorlane_symmetric.node"
    try {
      expect(native.addon<object>({ buildNeeds: "libexample-dev" }).candidates()).toEqual(["/opt/mine/tensorlane_symmetric.node"])
    } finally {
      delete process.env.TENSORLANE_SYMMETRIC_ADDON
    }
    const spec = native.library({
      library: "libexample.so.1",
      what: "the example library",
      wheel,
      folder: "example/lib",
      override,
      siblings: ["example/cu13/lib/libexample.so.2"],
      systemNames: ["libexample.so"],
    })
    expect(spec).toMatchObject({
      description: "the example library (libexample.so.1, from the example-cu12 1.2.3 wheel)",
      install: "example",
      sitePaths: ["example/lib/libexample.so.1", "example/cu13/lib/libexample.so.2"],
      systemNames: ["libexample.so.1", "libexample.so"],
    })
  })
})
