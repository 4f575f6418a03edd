/**
 * The one reader of environment settings (src/Settings.ts): unset and empty mean the fallback, and
 * any value a variable does not accept is an InvalidSettingError naming the variable, the value
 * and what it accepts; core's own setting (TENSORLANE_HOST_CACHE_BYTES) included.
 */
import { afterEach, describe, expect, it, vi } from "vitest"
import { InvalidSettingError } from "../src/Errors.js"
import { type Setting, choiceSetting, integerSetting, readSetting, textSetting, timeoutSetting } from "../src/Settings.js"

const VARIABLE = "TENSORLANE_TEST_SETTING"

afterEach(() => {
  vi.unstubAllEnvs()
})

/** What reading `setting` with the variable set to `raw` gives, or the error it throws. */
const readWith = <A>(setting: Setting<A>, raw: string | undefined): unknown => {
  vi.stubEnv(VARIABLE, raw)
  try {
    return readSetting(setting)
  } catch (error) {
    return error
  }
}

describe("readSetting", () => {
  const bytes = integerSetting(VARIABLE, { min: 1, max: 4096, fallback: 512, unit: "bytes" })

  it("gives the fallback for an unset or empty variable, and the value it accepts otherwise", () => {
    expect(readWith(bytes, undefined)).toBe(512)
    expect(readWith(bytes, "")).toBe(512)
    expect(readWith(bytes, "1")).toBe(1)
    expect(readWith(bytes, "4096")).toBe(4096)
  })

  it("refuses every other value with an InvalidSettingError naming the variable, the value and what it accepts", () => {
    for (const raw of ["0", "4097", "-5", "1.5", "1e3", " 12", "12 ", "0x10", "512KiB", "99999999999999999999"]) {
      const error = readWith(bytes, raw)
      expect(error, raw).toBeInstanceOf(InvalidSettingError)
      expect(error, raw).toMatchObject({
        variable: VARIABLE,
        value: raw,
        accepts: "a whole number of bytes from 1 to 4096",
        message: `${VARIABLE} must be a whole number of bytes from 1 to 4096, got "${raw}"`,
      })
    }
  })

  it("reads choices, timeouts and text the same way", () => {
    const mode = choiceSetting(VARIABLE, ["peer", "none"], "peer")
    expect(readWith(mode, undefined)).toBe("peer")
    expect(readWith(mode, "none")).toBe("none")
    expect(readWith(mode, "PEER")).toMatchObject({ _tag: "InvalidSettingError", accepts: "one of peer, none" })
    const wait = timeoutSetting(VARIABLE, 1000)
    expect(readWith(wait, "360000000")).toBe(360_000_000)
    expect(readWith(wait, "360000001")).toMatchObject({ _tag: "InvalidSettingError", accepts: "a whole number of milliseconds from 1 to 360000000" })
    expect(readWith(wait, "0")).toMatchObject({ _tag: "InvalidSettingError" })
    const path = textSetting(VARIABLE, "the path of a library")
    expect(readWith(path, "")).toBeUndefined()
    expect(readWith(path, "/opt/lib.so")).toBe("/opt/lib.so")
  })
})

describe("core's own setting", () => {
  it("TENSORLANE_HOST_CACHE_BYTES refuses what is not a byte count instead of falling back quietly", async () => {
    vi.stubEnv("TENSORLANE_HOST_CACHE_BYTES", "1GiB")
    vi.resetModules()
    await expect(import("../src/CpuMemory.js")).rejects.toMatchObject({
      _tag: "InvalidSettingError",
      variable: "TENSORLANE_HOST_CACHE_BYTES",
      value: "1GiB",
    })
  })
})
