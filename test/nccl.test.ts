/**
 * The nccl transport through the real runtime. With the real wheel libraries (no GPU here): a
 * method marked nccl that returns a CPU tensor fails with the typed device error, and group
 * creation fails on every member with the no-device error. With the TEST DOUBLES of libnccl and
 * libcudart (packages/transport-nccl/test/double) loaded by some actors: group creation shares the
 * unique id over the control plane, and pool registration agrees across actor processes through
 * group(name).allGather, rolling back a failure on one rank on every rank.
 */
import * as fs from "node:fs"
import { type ActorHandle, type Cluster, type ObjectRef, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildDoubles, doublesFolder, readLog } from "../packages/transport-nccl/test/double/build.ts"
import { NcclWorker } from "./fixtures/ncclActors.mjs"
import { expectClean, rejection, take } from "./helpers.ts"

const NCCL = "@tensorlane/transport-nccl"
const hasGpu = fs.existsSync("/dev/nvidia0")

let cluster: Cluster
// What the test doubles write, removed once the actors that loaded them are gone. Made here, not as
// the file loads: a run filtered to none of its tests runs no hook, afterAll's removal included.
let folder: ReturnType<typeof doublesFolder>
beforeAll(async () => {
  folder = doublesFolder()
  cluster = await start({ transports: [NCCL] })
}, 60_000)
afterAll(async () => {
  await cluster?.shutdown()
  folder?.remove()
})

describe("real libraries", () => {
  let a: ActorHandle<typeof NcclWorker>
  let b: ActorHandle<typeof NcclWorker>
  beforeAll(async () => {
    ;[a, b] = await cluster.spawn(NcclWorker, { count: 2, env: { NCCL_SOCKET_IFNAME: "lo" } })
  })

  it("a method marked nccl that returns a CPU tensor fails with DeviceError naming the device and the transport", async () => {
    const ref = a.cpuTensor()
    const error = await rejection(() => cluster.get(ref, { useObjectStore: true }))
    expect(error).toMatchObject({ _tag: "DeviceError", device: "cpu", transport: "nccl" })
    expect((error as Error).message).toMatch(/a tensor on cpu cannot travel over "nccl", which moves cuda memory/)
    ref.release()
    await expectClean(cluster)
  })

  it.skipIf(hasGpu)("creating an nccl group without a GPU fails with the no-device error", async () => {
    const error = await rejection(() => cluster.createCollectiveGroup([a, b], { backend: "nccl", name: "no-gpu" }))
    expect(error).toMatchObject({ _tag: "NoCudaDeviceError", device: "cuda:0", driverVersion: 0, deviceCount: 0 })
    expect((error as Error).message).toMatch(/no NVIDIA driver/)
    expect(cluster.listGroups().map((g) => g.name)).not.toContain("no-gpu")
  })
})

describe("a rank 0 that cannot make the group's unique id", () => {
  it("fails with NcclError on every member, at once, saying why, not at the group's timeout", async () => {
    const ranks = await cluster.spawn(NcclWorker, { count: 2, env: { NCCL_SOCKET_IFNAME: "nosuchif0" } })
    const started = Date.now()
    const error = await rejection(() => cluster.createCollectiveGroup(ranks, { backend: "nccl", name: "no-interface", timeoutMs: 30_000 }))
    expect(Date.now() - started).toBeLessThan(10_000)
    // Rank 0's own, or rank 1's naming it: whichever reaches the driver first.
    expect(error).toMatchObject({ _tag: "NcclError", message: expect.stringMatching(/ncclGetUniqueId/) })
    expect(cluster.listGroups().map((g) => g.name)).not.toContain("no-interface")
    for (const r of ranks) await cluster.kill(r)
  })
})

describe("pool registration across actor processes (test doubles of NCCL and CUDA)", () => {
  const doubles = buildDoubles()
  let log: string
  let ranks: Array<ActorHandle<typeof NcclWorker>>
  const GROUP = "dp"

  beforeAll(async () => {
    log = folder.log("actors")
    const env = { ...doubles.env, FAKE_NCCL_LOG: log, NCCL_SOCKET_IFNAME: "lo" }
    ranks = await cluster.spawn(NcclWorker, { count: 2, env })
    await cluster.createCollectiveGroup(ranks, { backend: "nccl", name: GROUP })
  })

  const all = <T>(call: (r: ActorHandle<typeof NcclWorker>) => ObjectRef<T>): Promise<Array<T>> =>
    Promise.all(ranks.map((r) => take(cluster)(call(r))))

  it("rank 0's unique id reached both communicators over the control plane", async () => {
    const inits = readLog(log).filter((l) => l.startsWith("ncclCommInitRankConfig"))
    expect(inits).toHaveLength(2)
    expect(new Set(inits.map((l) => /id=(\S+)/.exec(l)![1])).size).toBe(1)
    const comms = await all((r) => r.communicators())
    expect(comms.map((c) => c.map((x) => [x.group, x.rank, x.ready]))).toEqual([[[GROUP, 0, true]], [[GROUP, 1, true]]])
  })

  it("registration agrees across processes, and a failure on rank 1 is rolled back on both", async () => {
    expect(await all((r) => r.makePool(4096, [4096, 4096]))).toEqual([2, 2])
    await cluster.get(ranks[1].setEnv("FAKE_NCCL_FAIL", "ncclCommRegister:1:1"))
    const failed = await all((r) => r.register(GROUP))
    for (const outcome of failed) {
      expect(outcome).toMatchObject({ ok: false, tag: "NcclRegistrationError", failedRanks: [1], registered: [] })
    }
    await cluster.get(ranks[1].setEnv("FAKE_NCCL_FAIL", null))
    expect(await all((r) => r.register(GROUP))).toEqual([
      { ok: true, registered: [0, 1] },
      { ok: true, registered: [0, 1] },
    ])
    // An ncclMem scope registers only the segment allocated inside it.
    expect(await all((r) => r.allocateInScope(GROUP, 10_000))).toEqual([
      { ok: true, registered: [0, 1, 2] },
      { ok: true, registered: [0, 1, 2] },
    ])
    expect(await all((r) => r.deregister(GROUP))).toEqual([
      { ok: true, registered: [] },
      { ok: true, registered: [] },
    ])
  })

  it("ranks that plan different windows fail together before any NCCL call", async () => {
    await cluster.get(ranks[0].makePool(4096, [4096, 4096]))
    await cluster.get(ranks[1].makePool(4096, [4096]))
    const outcomes = await all((r) => r.register(GROUP, { symmetric: true }))
    for (const o of outcomes) expect(o).toMatchObject({ ok: false, tag: "NcclRegistrationError", failedRanks: [] })
    expect(readLog(log).filter((l) => l.startsWith("ncclCommWindowRegister"))).toEqual([])
  })
})
