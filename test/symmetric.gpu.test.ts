/**
 * The nvshmem backend on a GPU: actors of one group bootstrap NVSHMEM over the group's gather,
 * allocate on the symmetric heap with makeSymmetric (seed 002's shapes), see each other's copies
 * through nvshmem_ptr, and free collectively. Needs one NVIDIA GPU per actor (NVSHMEM maps one PE
 * to one GPU: with two GPUs each actor sees its own as cuda:0; with one, both actors use it, which
 * NVSHMEM accepts only in its multi-process-per-GPU mode); skipped on machines without /dev/nvidia0. The nccl-window backend
 * on two GPUs (one per actor): windows on an nccl group's communicator and on a heap's own
 * communicator of an shm group. The paths without a GPU run in symmetric.test.ts and
 * symmetricNccl.test.ts.
 */
import * as fs from "node:fs"
import { type ActorHandle, type Cluster, type GetOptions, type ObjectRef, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SymWorker } from "./fixtures/symmetricActors.mjs"
import { rejection, take as takeFrom } from "./helpers.ts"

const hasGpu = fs.existsSync("/dev/nvidia0")
const hasTwoGpus = hasGpu && fs.existsSync("/dev/nvidia1")

describe.skipIf(!hasGpu)("nvshmem on a GPU", () => {
  let cluster: Cluster
  let workers: Array<ActorHandle<typeof SymWorker>>
  const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

  beforeAll(async () => {
    cluster = await start({ transports: ["@tensorlane/symmetric-mem"] })
    workers = await Promise.all(
      ["0", hasTwoGpus ? "1" : "0"].map(
        async (gpu) => (await cluster.spawn(SymWorker, { env: { CUDA_VISIBLE_DEVICES: gpu, NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME: "lo" } }))[0],
      ),
    )
    await cluster.createCollectiveGroup(workers, { backend: "shm", name: "gpu" })
  }, 120_000)

  afterAll(() => cluster?.shutdown())

  it("allocates with makeSymmetric, exposes peers' copies, frees collectively", async () => {
    const shapes = [[3, 3], [2, 3]]
    const made = await Promise.all(workers.map((w, rank) => take(w.alloc("t", shapes[rank], "float32", { group: "gpu", backend: "nvshmem", makeSymmetric: true }))))
    made.forEach((m, rank) => expect(m).toMatchObject({ shape: shapes[rank], nbytes: shapes[rank][0] * 12, storageBytes: shapes[rank][0] * 12 }))
    const own = await take(workers[0].deviceInfo("t"))
    expect(own).toMatchObject({ device: "cuda:0", shape: [3, 3] })
    expect(BigInt(own.address)).not.toBe(0n)
    const peer = await take(workers[0].deviceInfo("t", 1))
    expect(peer).toMatchObject({ shape: [2, 3] })
    const freed = await Promise.all(workers.map((w) => take(w.free(["t"]))))
    for (const f of freed) expect(f).toEqual([false])
  })

  it("NVSHMEM stays on the device it was initialized on: an allocation on another fails with DeviceError on every rank", async () => {
    const failed = await Promise.all(
      workers.map((w) => rejection(take(w.alloc("u", [4], "float32", { group: "gpu", backend: "nvshmem", device: "cuda:1" })))),
    )
    for (const e of failed) expect(e).toMatchObject({ _tag: "DeviceError", message: expect.stringContaining("initialized on cuda:0") })
  })
})

describe.skipIf(!hasTwoGpus)("nccl-window on two GPUs", () => {
  let cluster: Cluster
  let workers: Array<ActorHandle<typeof SymWorker>>
  const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

  beforeAll(async () => {
    cluster = await start({ transports: ["@tensorlane/symmetric-mem", "@tensorlane/transport-nccl"] })
    workers = await Promise.all(
      ["0", "1"].map(async (gpu) => (await cluster.spawn(SymWorker, { env: { CUDA_VISIBLE_DEVICES: gpu, NCCL_SOCKET_IFNAME: "lo" } }))[0]),
    )
    await cluster.createCollectiveGroup(workers, { backend: "nccl", name: "win" })
    await cluster.createCollectiveGroup(workers, { backend: "shm", name: "heap" })
  }, 120_000)

  afterAll(() => cluster?.shutdown())

  for (const [group, backend, communicator] of [
    ["win", undefined, "win"],
    ["heap", "nccl-window", "heap/nccl-window"],
  ] as const) {
    it(`registers every rank's ncclMemAlloc block as a window of ${communicator}, copies to the host, frees collectively`, async () => {
      const shapes = [[4, 4], [2, 4]]
      const made = await Promise.all(workers.map((w, rank) => take(w.alloc("t", shapes[rank], "float32", { group, backend, makeSymmetric: true }))))
      made.forEach((m, rank) => expect(m).toMatchObject({ shape: shapes[rank], nbytes: shapes[rank][0] * 16 }))
      const own = await take(workers[1].deviceInfo("t"))
      expect(own).toMatchObject({ device: "cuda:0", communicator })
      expect(BigInt(own.window!)).not.toBe(0n)
      expect(Array.from((await take(workers[1].toHost("t"))) as ArrayLike<number>)).toHaveLength(8)
      expect(await Promise.all(workers.map((w) => take(w.free(["t"]))))).toEqual([[false], [false]])
      expect((await take(workers[0].communicators())).sort()).toEqual(["win"])
    })
  }
})
