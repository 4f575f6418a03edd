/**
 * The NCCL examples (examples/nccl): without a GPU they stop cleanly with the typed no-device
 * error; the Megatron pool example also runs to completion against the TEST DOUBLES of libnccl and
 * libcudart, which checks its registration flow (not data movement). nccl.gpu.test.ts runs them on GPUs.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"
import { buildDoubles, doublesFolder } from "../packages/transport-nccl/test/double/build.ts"

const run = promisify(execFile)
const root = fileURLToPath(new URL("..", import.meta.url))
const hasGpu = fs.existsSync("/dev/nvidia0")

const runExample = (file: string, env: Record<string, string> = {}) =>
  run(process.execPath, ["--import", "tsx", `examples/nccl/${file}`], { cwd: root, timeout: 60_000, env: { ...process.env, NCCL_SOCKET_IFNAME: "lo", ...env } })

describe.skipIf(hasGpu)("NCCL examples without a GPU", () => {
  it.each(["random-tensor-sum.ts", "megatron-pool.ts"])("%s stops with NoCudaDeviceError (exit code 1)", async (file) => {
    const failure = await runExample(file).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    )
    expect(failure?.code).toBe(1)
    expect(failure?.stderr).toMatch(/^NoCudaDeviceError: creating nccl group "[^"]+" \(rank \d of 2\): ncclCommInitRankConfig .* failed: ncclUnhandledCudaError: .*; no NVIDIA driver is installed/m)
  })
})

describe("the Megatron pool example against the test doubles", () => {
  const folder = doublesFolder()
  afterAll(() => folder.remove())

  it("registers trainer 0's pool with dp and ep, and the others with their one group", async () => {
    const { stdout } = await runExample("megatron-pool.ts", { ...buildDoubles().env, ...folder.env, FAKE_NCCL_COLLECTIVE: "1" })
    expect(stdout).toMatch(/^trainer 0: 8192 bytes in 1 segment\(s\)$/m)
    expect(stdout).toMatch(/^trainer 0 registered with: \{"dp":1,"ep":1\}$/m)
    expect(stdout).toMatch(/^trainer 1 registered with: \{"dp":1\}$/m)
    expect(stdout).toMatch(/^trainer 2 registered with: \{"ep":1\}$/m)
  })
})
