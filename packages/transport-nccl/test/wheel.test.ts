/**
 * The real libraries from the wheels that tools/setup.sh installs into .tools/libraries
 * (nvidia-nccl-cu12, nvidia-cuda-runtime-cu12): they load, report their version, make unique ids
 * on loopback, and on a machine without a GPU every device path fails with NoCudaDeviceError.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { Tensor } from "@tensorlane/core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { NcclEffect, createNcclMemPool, libraryCandidates, loadNccl, nccl, ncclStatus } from "../src/index.js"

const hasGpu = fs.existsSync("/dev/nvidia0")
const repo = fileURLToPath(new URL("../../..", import.meta.url))
const wheelNccl = `${repo}.tools/libraries/nvidia_nccl_cu12-2.28.9/nvidia/nccl/lib/libnccl.so.2`
const wheelCudart = `${repo}.tools/libraries/nvidia_cuda_runtime_cu12-12.9.79/nvidia/cuda_runtime/lib/libcudart.so.12`

describe("libraries of the wheels", () => {
  it("setup installed both wheels where the loader looks first", () => {
    expect(fs.existsSync(wheelNccl)).toBe(true)
    expect(fs.existsSync(wheelCudart)).toBe(true)
    const { nccl: ncclPaths, cudart } = libraryCandidates()
    expect(ncclPaths).toContain(wheelNccl)
    expect(ncclPaths.at(-1)).toBe("libnccl.so.2")
    expect(cudart).toContain(wheelCudart)
    expect(cudart.indexOf(wheelCudart)).toBeLessThan(cudart.indexOf("libcudart.so.12"))
  })

  it("libnccl.so.2 loads and reports version 2.28.9, with every feature gate open", () => {
    const status = ncclStatus()
    expect(status.library).toBe(wheelNccl)
    expect(status.version).toBe("2.28.9")
    expect(status.versionCode).toBe(22809)
    expect(status.features).toEqual({ nonblocking: true, bfloat16: true, registration: true, float8: true, windows: true })
    expect(status.cudart).toBe(wheelCudart)
    expect(status.devices.runtimeVersion).toBe(12090)
  })

  it("ncclGetUniqueId makes a fresh 128-byte id on loopback each time", () => {
    expect(process.env.NCCL_SOCKET_IFNAME).toBe("lo")
    const { addon } = loadNccl()
    const a = addon.uniqueId()
    const b = addon.uniqueId()
    expect(a.byteLength).toBe(128)
    expect(a.some((x) => x !== 0)).toBe(true)
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false)
  })
})

describe.skipIf(hasGpu)("without a GPU", () => {
  it("the CUDA runtime sees no driver and no device", () => {
    expect(ncclStatus().devices).toMatchObject({ count: 0, driverVersion: 0 })
  })

  it("NCCL's own communicator init runs, fails, and that is a NoCudaDeviceError leaving no communicator behind", async () => {
    const gathered: Array<Uint8Array> = []
    const creating = nccl.createGroup!({
      name: "no-gpu",
      rank: 0,
      worldSize: 1,
      members: ["a"],
      timeoutMs: 10_000,
      allGather: async (blob) => (gathered.push(blob), [blob]),
    })
    await expect(creating).rejects.toMatchObject({ _tag: "NoCudaDeviceError", device: "cuda:0", driverVersion: 0, deviceCount: 0 })
    await expect(creating).rejects.toThrow(/no NVIDIA driver/)
    // The failure is NCCL's (ncclCommInitRankConfig ran with the wheel's library), not a pre-check of the CUDA runtime.
    await expect(creating).rejects.toThrow(
      /ncclCommInitRankConfig \(group "no-gpu", rank 0 of 1\) failed: ncclUnhandledCudaError: .*Cuda failure 'CUDA driver version is insufficient/,
    )
    // Rank 0 shared a real unique id before init failed: its marker, then 128 bytes.
    expect([gathered[0][0], gathered[0].byteLength]).toEqual([0, 129])
    expect(ncclStatus().communicators).toEqual([])
  })

  it("CUDA tensors and pool memory fail with NoCudaDeviceError", () => {
    expect(() => Tensor.zeros([4], { device: "cuda:0" })).toThrow(expect.objectContaining({ _tag: "NoCudaDeviceError" }))
    expect(() => Tensor.ones([4]).to("cuda:0")).toThrow(expect.objectContaining({ _tag: "NoCudaDeviceError" }))
    expect(() => createNcclMemPool().allocate(1024)).toThrow(expect.objectContaining({ _tag: "NoCudaDeviceError" }))
  })

  it("the Effect face fails with typed errors (failures, not defects)", async () => {
    const member = { name: "not-a-group", rank: 0, worldSize: 1, allGather: async (b: Uint8Array) => [b] }
    const error = await Effect.runPromise(
      Effect.gen(function* () {
        const pool = yield* NcclEffect.createNcclMemPool()
        return yield* NcclEffect.registerMemPool(pool, member)
      }).pipe(Effect.flip, Effect.scoped),
    )
    expect(error).toMatchObject({ _tag: "MissingGroupError", backend: "nccl" })
    const status = await Effect.runPromise(NcclEffect.ncclStatus)
    expect(status.version).toBe("2.28.9")
  })
})

describe("the addon's lifetime", () => {
  it("stays mapped after the only worker that loaded it exits (its communicator threads may outlive the worker)", async () => {
    const script = `
      import { Worker } from "node:worker_threads"
      import * as fs from "node:fs"
      const worker = new Worker('import("@tensorlane/transport-nccl").then((m) => m.ncclStatus())', { eval: true })
      await new Promise((resolve, reject) => { worker.on("exit", resolve); worker.on("error", reject) })
      const mapped = fs.readFileSync("/proc/self/maps", "utf8").includes("tensorlane_nccl.node")
      console.log(JSON.stringify({ mapped }))
    `
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: repo })
    expect(JSON.parse(stdout)).toEqual({ mapped: true })
  })
})

describe("a missing library", () => {
  it("is a NativeLibraryError naming the library, where it looked and how to install it", async () => {
    const script = `
      import { ncclStatus } from "@tensorlane/transport-nccl"
      try { ncclStatus() } catch (e) { console.log(JSON.stringify({ tag: e._tag, library: e.library, tried: e.tried, fix: e.fix, message: e.message })) }
    `
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      cwd: repo,
      env: { ...process.env, TENSORLANE_NCCL_LIBRARY: "/nonexistent/libnccl.so.2" },
    })
    const error = JSON.parse(stdout)
    expect(error).toMatchObject({ tag: "NativeLibraryError", library: "libnccl.so.2", tried: ["/nonexistent/libnccl.so.2"] })
    expect(error.fix).toMatch(/^npx -p @tensorlane\/cli tensorlane install nccl, or, in the repository .*: bash tools\/setup\.sh, .*TENSORLANE_NCCL_LIBRARY/)
    expect(error.message).toMatch(/cannot be loaded\. Tried: \/nonexistent\/libnccl\.so\.2/)
  })
})
