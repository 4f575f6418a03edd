/**
 * On one real GPU (skipped without one): CUDA tensors through cudaMalloc/cudaMemcpy, a one-rank
 * communicator (NCCL refuses two ranks on one GPU), collectives on it, a pool registered as buffers
 * and as windows, and the window API for @tensorlane/symmetric-mem. Run with
 * `npm run test:gpu -w @tensorlane/transport-nccl` on a machine with GPUs.
 */
import * as fs from "node:fs"
import { Tensor } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  allocateNcclMemory,
  createNcclMemPool,
  deregisterMemPool,
  deregisterNcclWindow,
  freeNcclMemory,
  nccl,
  ncclMem,
  ncclStatus,
  registerMemPool,
  registerNcclWindow,
} from "../src/index.js"

const hasGpu = fs.existsSync("/dev/nvidia0")
const GROUP = "gpu-solo"
const member = { name: GROUP, rank: 0, worldSize: 1, allGather: async (blob: Uint8Array) => [blob] }
const signal = () => new AbortController().signal

describe.skipIf(!hasGpu)("one GPU", () => {
  beforeAll(async () => {
    await nccl.createGroup!({ name: GROUP, rank: 0, worldSize: 1, members: ["solo"], timeoutMs: 60_000, allGather: member.allGather })
  })
  afterAll(() => nccl.destroyGroup!(GROUP))

  it("sees the GPU and a ready one-rank communicator", () => {
    const status = ncclStatus()
    expect(status.devices.count).toBeGreaterThan(0)
    expect(status.communicators).toEqual([expect.objectContaining({ group: GROUP, rank: 0, size: 1, ready: true, broken: undefined })])
  })

  it("CUDA tensors round-trip through device memory", () => {
    const host = Tensor.arange(1 << 20, { dtype: "float32" })
    const device = host.to("cuda:0")
    expect(device.device).toBe("cuda:0")
    expect(Array.from(device.to("cpu").toArray().slice(0, 4))).toEqual([0, 1, 2, 3])
    expect(device.clone().to("cpu").sum()).toBe(host.sum())
  })

  it("allreduce and broadcast run on the communicator (one rank: values unchanged), bfloat16 included", async () => {
    const t = Tensor.full([1024], 3, { dtype: "float32" }).to("cuda:0")
    const b = Tensor.full([1024], 2, { dtype: "bfloat16" }).to("cuda:0")
    await nccl.allreduce!({ group: GROUP, tensors: [t, b], op: "sum", signal: signal() })
    expect(t.to("cpu").sum()).toBe(3 * 1024)
    expect(b.to("cpu").sum()).toBe(2 * 1024)
    await nccl.broadcast!({ group: GROUP, tensors: [t], root: 0, signal: signal() })
    expect(t.to("cpu").sum()).toBe(3 * 1024)
  })

  it("a pool registers its segments as buffers, and an ncclMem scope registers the new ones", async () => {
    const pool = createNcclMemPool({ symmetric: false })
    const a = pool.allocate(1 << 20)
    await registerMemPool(pool, member)
    expect(ncclStatus().communicators[0].registrations).toBe(1)
    {
      await using mem = await ncclMem(pool, { group: member })
      mem.run(() => Tensor.zeros([4 << 20], { dtype: "uint8", device: "cuda:0" }))
    }
    expect(ncclStatus().communicators[0].registrations).toBe(2)
    await deregisterMemPool(pool, member)
    expect(ncclStatus().communicators[0].registrations).toBe(0)
    pool.free(a)
  })

  it.skipIf(!ncclStatusSafe()?.features.windows)("windows: a symmetric pool, and the window API for symmetric-mem", async () => {
    const pool = createNcclMemPool({ symmetric: true })
    pool.allocate(1 << 20)
    await registerMemPool(pool, member)
    expect(ncclStatus().communicators[0].windows).toBe(1)
    await deregisterMemPool(pool, member)
    const storage = allocateNcclMemory("cuda:0", 1 << 20)
    const window = await registerNcclWindow(GROUP, storage)
    expect(ncclStatus().communicators[0].windows).toBe(1)
    await deregisterNcclWindow(window)
    expect(ncclStatus().communicators[0].windows).toBe(0)
    freeNcclMemory(storage)
  })
})

function ncclStatusSafe() {
  try {
    return hasGpu ? ncclStatus() : undefined
  } catch {
    return undefined
  }
}
