/** A package's addon (core's nativeAddon) and the search for the shared libraries addons dlopen (libraryCandidates / loadNativeLibrary). */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterEach, describe, expect, it } from "vitest"
import { type NativeLibrarySpec, type RuntimeWheel, libraryCandidates, loadNativeLibrary, nativeAddon } from "../src/NativeAddon.js"
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

const FIX_IN_CHECKOUT = `npx tensorlane install example, or bash tools/setup.sh in the repository, or point ${ENV} at the folder that holds libexample.so.1`

const xdgCacheHome = process.env.XDG_CACHE_HOME

afterEach(() => {
  delete process.env[ENV]
  delete process.env.TENSORLANE_EXAMPLE_ADDON
  if (xdgCacheHome === undefined) delete process.env.XDG_CACHE_HOME
  else process.env.XDG_CACHE_HOME = xdgCacheHome
})

describe("a package's addon", () => {
  const example = () => nativeAddon<object>({ packageName: "@tensorlane/core", moduleUrl: import.meta.url, name: "example" })
  const root = join(import.meta.dirname, "..")

  it("is tensorlane_<name>.node in the package's Release then Debug build, or TENSORLANE_<NAME>_ADDON alone", () => {
    expect(example().candidates()).toEqual([join(root, "build", "Release", "tensorlane_example.node"), join(root, "build", "Debug", "tensorlane_example.node")])
    process.env.TENSORLANE_EXAMPLE_ADDON = "/opt/mine/tensorlane_example.node"
    expect(example().candidates()).toEqual(["/opt/mine/tensorlane_example.node"])
  })

  it("is loaded on first use; one that is not built is a NativeLibraryError with every path and the fix", () => {
    const addon = example()
    expect(addon.loaded()).toBeUndefined()
    let error: unknown
    try {
      addon.load()
    } catch (e) {
      error = e
    }
    expect(error).toMatchObject({
      _tag: "NativeLibraryError",
      library: "tensorlane_example.node",
      tried: addon.candidates(),
      fix: "npm run build:native -w @tensorlane/core, or bash tools/setup.sh",
    })
    expect(addon.loaded()).toBeUndefined()
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
        message: expect.stringMatching(/^the example library \(libexample\.so\.1\) cannot be loaded\. Tried: .*dlopen .*libexample\.so\.1 failed.*dlopen libexample\.so failed.*Fix: npx tensorlane install example, /),
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

  it("names the install command, and the setup script only when the package runs from the repository's checkout", () => {
    const outside = fs.mkdtempSync(join(os.tmpdir(), "native-library-outside-"))
    try {
      const fail = (moduleUrl: string) => thrown(() => loadNativeLibrary(spec("file", moduleUrl), () => {
        throw new Error("no")
      }))
      process.env[ENV] = "/nowhere/libexample.so.1"
      expect(fail(import.meta.url)).toMatchObject({ fix: `npx tensorlane install example, or bash tools/setup.sh in the repository, or set ${ENV} to the path of a libexample.so.1` })
      expect(fail(pathToFileURL(join(outside, "index.js")).href)).toMatchObject({ fix: `npx tensorlane install example, or set ${ENV} to the path of a libexample.so.1` })
    } finally {
      fs.rmSync(outside, { recursive: true, force: true })
    }
  })
})
