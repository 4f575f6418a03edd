/**
 * The typed error of each native failure code (src/NativeFailure.ts): one meaning per code for
 * every addon, a package's own wording where it gives one, and errors that are no addon failure
 * passed through.
 */
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { ProtocolError } from "../src/Errors.js"
import type { NativeLibrarySpec } from "../src/NativeAddon.js"
import { type FailureContext, type NativeFailureCode, nativeError } from "../src/NativeFailure.js"

const failure = (code: NativeFailureCode, message: string, fields: Record<string, string> = {}): Error =>
  Object.assign(new Error(message), { code }, fields)

const library: NativeLibrarySpec = {
  library: "libtest.so.1",
  packageName: "@tensorlane/core",
  moduleUrl: import.meta.url,
  override: { env: "TENSORLANE_TEST_LIBRARY", names: "file" },
  install: "test",
  wheel: { name: "test", version: "1", url: "https://files.example.org/test-1-py3-none-any.whl", bytes: 1, sha256: "0".repeat(64), libraries: [] },
  path: "libtest.so.1",
  sitePaths: [],
  systemNames: [],
}

const context: FailureContext = { transport: "test", library, timeoutMs: 250 }

describe("nativeError", () => {
  it("gives every code the same typed error, the operation's name first", () => {
    const expected: Record<NativeFailureCode, Record<string, unknown>> = {
      usage: { _tag: "UnsupportedOperationError" },
      protocol: { _tag: "ProtocolError" },
      setting: { _tag: "InvalidSettingError" },
      library: {
        _tag: "NativeLibraryError",
        library: "libtest.so.1",
        tried: [],
        fix: `npx -p @tensorlane/cli tensorlane install test, or, in the repository ${join(import.meta.dirname, "..", "..", "..")}: bash tools/setup.sh, or set TENSORLANE_TEST_LIBRARY to the path of a libtest.so.1`,
      },
      system: { _tag: "TransferError", transport: "test" },
      io: { _tag: "TransferError", transport: "test" },
      timeout: { _tag: "TimeoutError", timeoutMs: 250 },
      aborted: { _tag: "TransferError", transport: "test" },
      broken: { _tag: "TransferError", transport: "test" },
      closed: { _tag: "TransferError", transport: "test" },
      dtype: { _tag: "DTypeError" },
      shape: { _tag: "ShapeError" },
      transfer: { _tag: "TransferError", transport: "test" },
      registration: { _tag: "TransferError", transport: "test" },
      nodevice: { _tag: "TransferError", transport: "test" },
      version: { _tag: "TransferError", transport: "test" },
      nccl: { _tag: "TransferError", transport: "test" },
      cuda: { _tag: "TransferError", transport: "test" },
    }
    for (const [code, fields] of Object.entries(expected)) {
      expect(nativeError(failure(code as NativeFailureCode, "it failed"), "the op", context), code).toMatchObject({ ...fields, message: "the op: it failed" })
    }
  })

  it("keeps a native setting failure's variable, value and what it accepts", () => {
    const setting = failure("setting", 'TENSORLANE_X must be one of a, b, got "c"', { variable: "TENSORLANE_X", value: "c", accepts: "one of a, b" })
    expect(nativeError(setting, "opening", context)).toMatchObject({
      _tag: "InvalidSettingError",
      variable: "TENSORLANE_X",
      value: "c",
      accepts: "one of a, b",
      message: 'opening: TENSORLANE_X must be one of a, b, got "c"',
    })
  })

  it("a package's wording wins for the codes it words, and the shared meaning stays for the others", () => {
    const wording = (f: { code: string }, message: string) => (f.code === "io" ? new ProtocolError({ message: `worded ${message}` }) : undefined)
    expect(nativeError(failure("io", "reset"), "recv", context, wording)).toMatchObject({ _tag: "ProtocolError", message: "worded recv: reset" })
    expect(nativeError(failure("closed", "gone"), "recv", context, wording)).toMatchObject({ _tag: "TransferError" })
  })

  it("without a library of its own, a library failure is a TransferError; what is no addon failure passes through", () => {
    expect(nativeError(failure("library", "not loaded"), "op", { transport: "test" })).toMatchObject({ _tag: "TransferError" })
    const plain = new RangeError("out of range")
    expect(nativeError(plain, "op", context)).toBe(plain)
    expect(nativeError("a string", "op", context)).toMatchObject({ _tag: "TransferError", message: "op: a string" })
  })
})
