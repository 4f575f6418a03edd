import * as os from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { tensorlaneCacheDir } from "../src/CacheDir.ts"

const saved = process.env.XDG_CACHE_HOME

afterEach(() => {
  if (saved === undefined) delete process.env.XDG_CACHE_HOME
  else process.env.XDG_CACHE_HOME = saved
})

describe("tensorlaneCacheDir", () => {
  it("is tensorlane/ under XDG_CACHE_HOME when it is an absolute path", () => {
    process.env.XDG_CACHE_HOME = "/var/cache/someone"
    expect(tensorlaneCacheDir()).toBe("/var/cache/someone/tensorlane")
  })

  it("is ~/.cache/tensorlane when XDG_CACHE_HOME is unset, empty or relative", () => {
    for (const value of [undefined, "", "relative/cache"]) {
      if (value === undefined) delete process.env.XDG_CACHE_HOME
      else process.env.XDG_CACHE_HOME = value
      expect(tensorlaneCacheDir()).toBe(join(os.homedir(), ".cache", "tensorlane"))
    }
  })
})
