/** A package's addon (core's nativeAddon) and the search for the shared libraries addons dlopen (libraryCandidates / loadNativeLibrary). */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { type NativeLibrarySpec, libraryCandidates, loadNativeLibrary, nativeAddon } from "../src/NativeAddon.js"
import { thrown } from "./helpers/errors.ts"

const ENV = "TENSORLANE_TEST_LIBRARY_OVERRIDE"

const spec = (names: "folder" | "file"): NativeLibrarySpec => ({
  library: "libexample.so.1",
  description: "the example library (libexample.so.1)",
  packageName: "@tensorlane/core",
  moduleUrl: import.meta.url,
  override: { env: ENV, names },
  toolDir: "example",
  wheelPaths: ["example/lib/libexample.so.1"],
  systemNames: ["libexample.so.1", "libexample.so"],
  fix: "install the example wheel",
})

afterEach(() => {
  delete process.env[ENV]
  delete process.env.TENSORLANE_EXAMPLE_ADDON
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
  it("tries the override folder, .tools/<dir> in every ancestor of the package and of the cwd, then the system names", () => {
    process.env[ENV] = "/opt/example"
    const candidates = libraryCandidates(spec("folder"))
    expect(candidates[0]).toBe("/opt/example/libexample.so.1")
    const repo = join(import.meta.dirname, "..", "..", "..")
    expect(candidates).toContain(join(repo, ".tools", "example", "example", "lib", "libexample.so.1"))
    expect(candidates).toContain(join("/", ".tools", "example", "example", "lib", "libexample.so.1"))
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
        fix: "install the example wheel",
        tried: libraryCandidates(spec("folder")),
        message: expect.stringMatching(/^the example library \(libexample\.so\.1\) cannot be loaded\. Tried: .*dlopen .*libexample\.so\.1 failed.*dlopen libexample\.so failed.*Fix: install the example wheel$/),
      })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
