/**
 * NVSHMEM for real, as far as a machine without a GPU allows: the host library from the
 * nvidia-nvshmem-cu12 wheel (unpacked by tools/setup.sh into .tools/libraries) is found and loaded,
 * its version and init status read; an allocation before a successful init is refused natively
 * (NVSHMEM would otherwise try to initialize and exit the process); a library that does not load
 * is a typed failure. The collective refusal (bootstrap over a group, init failing on every rank)
 * runs between actors in test/symmetric.test.ts; allocations on a GPU in nvshmem.gpu.test.ts.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { libraryCacheDir } from "@tensorlane/core/native"
import { describe, expect, it } from "vitest"
import { nvshmemCandidates, nvshmemStatus } from "../src/index.ts"
import { loadAddon } from "../src/Loader.ts"
import { buildFakeCudaDriver, fakeCudaCalls } from "./doubles/build.ts"

describe("NVSHMEM's host library", () => {
  it("is looked for in NVSHMEM_LIB_DIR first, then the user cache, then the project's .tools/libraries, then the system", () => {
    process.env.NVSHMEM_LIB_DIR = "/opt/custom/nvshmem"
    try {
      const candidates = nvshmemCandidates()
      expect(candidates[0]).toBe("/opt/custom/nvshmem/libnvshmem_host.so.3")
      const inWheel = "nvidia_nvshmem_cu12-3.8.0/nvidia/nvshmem/lib/libnvshmem_host.so.3"
      expect(candidates[1]).toBe(join(libraryCacheDir(), inWheel))
      expect(candidates.some((c) => c.endsWith(`.tools/libraries/${inWheel}`))).toBe(true)
      expect(candidates.at(-1)).toBe("libnvshmem_host.so.3")
    } finally {
      delete process.env.NVSHMEM_LIB_DIR
    }
  })

  it("a file that is no library fails to load with a library failure naming it", () => {
    const bogus = new URL("../package.json", import.meta.url).pathname
    expect(() => loadAddon().nvshmemLoad(bogus)).toThrow(expect.objectContaining({ code: "library", message: expect.stringContaining("package.json") }))
  })

  it("loads from the wheel, reports its version, and is not initialized", () => {
    const status = nvshmemStatus()
    expect(fs.existsSync(status.library)).toBe(true)
    expect(status.library).toContain(".tools/libraries/nvidia_nvshmem_cu12-3.8.0/")
    expect(status.version).toBe("3.8.0")
    expect(status.initStatus).toBe(0)
  })

  it("refuses an allocation before init, natively, instead of letting NVSHMEM exit the process", () => {
    const addon = loadAddon()
    expect(() => addon.nvshmemMalloc(1024)).toThrow(expect.objectContaining({ code: "usage", message: expect.stringContaining("not initialized (nvshmemx_init_status() = 0)") }))
    expect(() => addon.nvshmemPes()).toThrow(expect.objectContaining({ code: "usage" }))
    expect(nvshmemStatus().initStatus).toBe(0)
  })

  it("checks an allocation's size before anything else: a negative, fractional or huge size never reaches size_t", () => {
    const addon = loadAddon()
    for (const bad of [-1, 1.5, 2 ** 64, Number.NaN]) {
      expect(() => addon.nvshmemMalloc(bad)).toThrow(expect.objectContaining({ code: "protocol", message: "bytes must be a non-negative integer" }))
    }
    expect(() => addon.nvshmemMalloc("8" as never)).toThrow(expect.objectContaining({ code: "protocol", message: "bytes must be a number" }))
  })
})

describe("the CUDA driver's device selection before NVSHMEM's init (cudaSetDevice's effect)", () => {
  it("probes and makes a device current through a TEST DOUBLE of libcuda.so.1, and says why not when it cannot", () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-fake-cuda-"))
    const log = join(dir, "calls.log")
    try {
      const fake = buildFakeCudaDriver(dir)
      // A process of its own: the first driver that loads stays for the process (a GPU host's real one here).
      const script = `
        const addon = require(process.argv[1])
        const [missing, fake] = process.argv.slice(2)
        const steps = { missing: addon.cudaProbe(missing, 0), noCurrent: addon.cudaCurrentDevice() }
        process.env.FAKE_CUDA_INIT_RESULT = "100"
        steps.noDevice = addon.cudaProbe(fake, 0)
        delete process.env.FAKE_CUDA_INIT_RESULT
        steps.absent = addon.cudaProbe(fake, 5)
        steps.present = addon.cudaProbe(fake, 1)
        steps.made = addon.cudaMakeCurrent(1) ?? "current"
        steps.current = addon.cudaCurrentDevice()
        console.log(JSON.stringify(steps))`
      const addonPath = new URL("../build/Release/tensorlane_symmetric.node", import.meta.url).pathname
      const out = execFileSync(process.execPath, ["-e", script, addonPath, join(dir, "no-such-libcuda.so.1"), fake], {
        env: { ...process.env, FAKE_CUDA_LOG: log, FAKE_CUDA_DEVICES: "2" },
        encoding: "utf8",
      })
      expect(JSON.parse(out)).toEqual({
        missing: { usable: false, deviceCount: -1, reason: expect.stringContaining("no-such-libcuda.so.1") },
        noCurrent: -1,
        noDevice: { usable: false, deviceCount: -1, reason: "cuInit failed: CUDA_ERROR_NO_DEVICE (100)" },
        absent: { usable: false, deviceCount: 2, reason: "the driver sees 2 device(s), so there is no cuda:5" },
        present: { usable: true, deviceCount: 2 },
        made: "current",
        current: 1,
      })
      // Probing retains nothing: only cudaMakeCurrent touches a context.
      expect(fakeCudaCalls(log).map(([, call]) => call)).toEqual([
        "cuInit 0",
        "cuInit 0",
        "cuDeviceGetCount 2",
        "cuInit 0",
        "cuDeviceGetCount 2",
        "cuDeviceGet 1",
        "cuDevicePrimaryCtxRetain 1",
        "cuCtxSetCurrent 2",
        "cuCtxGetDevice 1",
      ])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
