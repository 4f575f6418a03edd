/**
 * The nccl-window backend of @tensorlane/symmetric-mem across actor processes, against the TEST
 * DOUBLES of libnccl and libcudart (packages/transport-nccl/test/double: "device memory" is host
 * memory and NCCL calls are only recorded). What is checked is what the backend asks of NCCL and
 * how the ranks agree: ncclMemAlloc then ncclCommWindowRegister on the right communicator, a failed
 * ncclMemAlloc rolled back on every rank, a window registration failing on one rank aborting every
 * rank's communicator (the double's window calls are collective: FAKE_NCCL_COLLECTIVE=1), windows
 * deregistered before the memory and the communicator go, the version gate. The real wheel's path (NoCudaDeviceError on every rank) runs
 * in symmetric.test.ts; real windows need GPUs (symmetric.gpu.test.ts).
 */
import * as fs from "node:fs"
import { type ActorHandle, type Cluster, type CollectiveGroup, type ObjectRef, start } from "@tensorlane/core"
import { SymmetricBackendError } from "@tensorlane/symmetric-mem"
import { NcclError, NcclRegistrationError, NcclVersionError } from "@tensorlane/transport-nccl"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { buildDoubles, doublesFolder, readLog } from "../packages/transport-nccl/test/double/build.ts"
import { SymWorker } from "./fixtures/symmetricActors.mjs"
import { rejection, take as takeFrom } from "./helpers.ts"

const doubles = buildDoubles()
// Made in beforeAll, not as the file loads: a run filtered to none of its tests runs no hook, afterAll's removal included.
let folder: ReturnType<typeof doublesFolder>
let log: string
let env: Record<string, string>

let cluster: Cluster
let ranks: Array<ActorHandle<typeof SymWorker>>
let win: CollectiveGroup
const take = <T>(ref: ObjectRef<T>) => takeFrom(cluster)(ref)

const onAll = <A>(call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<A>): Promise<Array<A>> =>
  Promise.all(ranks.map((w, rank) => take(call(w, rank))))

/** Each rank's outcome: its value or the error it failed with. */
const settleAll = (call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<unknown>): Promise<Array<{ value?: unknown; error?: Error }>> =>
  Promise.all(ranks.map((w, rank) => take(call(w, rank)).then((value) => ({ value }), (error: Error) => ({ error }))))

const calls = (prefix: string, rank?: number): Array<string> =>
  readLog(log).filter((l) => l.startsWith(`${prefix} `) && (rank === undefined || l.includes(`rank=${rank} `)))

const field = (line: string, name: string): string => new RegExp(`${name}=(\\S+)`).exec(line)?.[1] ?? ""

beforeAll(async () => {
  folder = doublesFolder()
  log = folder.log("symmetric")
  env = { ...doubles.env, ...folder.env, FAKE_NCCL_LOG: log, FAKE_NCCL_COLLECTIVE: "1", NCCL_SOCKET_IFNAME: "lo" }
  cluster = await start({ transports: ["@tensorlane/symmetric-mem", "@tensorlane/transport-nccl"] })
  ranks = await cluster.spawn(SymWorker, { count: 2, env })
  win = await cluster.createCollectiveGroup(ranks, { backend: "nccl", name: "win" })
  await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "heap" })
}, 60_000)

afterAll(async () => {
  await cluster?.shutdown()
  folder?.remove()
})

beforeEach(() => {
  fs.rmSync(log, { force: true })
})

describe("nccl-window over an nccl group (test doubles)", () => {
  it("is the default in an nccl group: ncclMemAlloc of the agreed size, then a window on the group's communicator on every rank", async () => {
    const shapes = [
      [4, 4],
      [2, 4],
    ]
    const made = await onAll((w, rank) => w.alloc("w", shapes[rank], "float32", { group: "win", makeSymmetric: true }))
    made.forEach((m, rank) => expect(m).toEqual({ shape: shapes[rank], nbytes: shapes[rank][0] * 16, storageBytes: shapes[rank][0] * 16, symmetric: true }))
    // Every rank's block has the largest size; each window is registered symmetric (flags 1).
    expect(calls("ncclMemAlloc").map((l) => field(l, "size"))).toEqual(["64", "64"])
    for (const rank of [0, 1]) {
      const [window] = calls("ncclCommWindowRegister", rank)
      expect([field(window, "size"), field(window, "flags")]).toEqual(["64", "1"])
      const info = await take(ranks[rank].deviceInfo("w"))
      expect(info).toMatchObject({ device: "cuda:0", shape: shapes[rank], nbytes: shapes[rank][0] * 16, communicator: "win" })
      expect(`0x${BigInt(info.address).toString(16)}`).toBe(field(window, "ptr"))
      expect(`0x${BigInt(info.window!).toString(16)}`).toBe(field(window, "window"))
    }
    // No extra communicator: the windows live on the group's own.
    expect(await onAll((w) => w.communicators())).toEqual([["win"], ["win"]])
    // Copies to the host go through transport-nccl's cudaMemcpy (the double's memory is zeroed).
    expect(Array.from(await take(ranks[1].toHost("w")) as ArrayLike<number>)).toEqual(new Array(8).fill(0))
    const peer = await rejection(take(ranks[0].deviceInfo("w", 1)))
    expect(peer).toBeInstanceOf(SymmetricBackendError)
    expect(peer).toMatchObject({ reason: "unsupported", message: expect.stringContaining("no host-side address of rank 1's copy") })
    expect(await onAll((w) => w.free(["w"]))).toEqual([[false], [false]])
    // Each rank deregisters its window before it frees the memory under it.
    for (const rank of [0, 1]) {
      const window = field(calls("ncclCommWindowRegister", rank)[0], "window")
      const lines = readLog(log)
      const deregistered = lines.findIndex((l) => l.startsWith(`ncclCommWindowDeregister rank=${rank} window=${window} `))
      const address = field(calls("ncclCommWindowRegister", rank)[0], "ptr")
      expect(deregistered).toBeGreaterThanOrEqual(0)
      expect(lines.indexOf(`ncclMemFree ptr=${address}`)).toBeGreaterThan(deregistered)
    }
  })

  it("a window registration failing on rank 1 leaves rank 0 inside the collective call: every rank aborts the communicator, frees its memory and says to create the group again", async () => {
    await take(ranks[1].setEnv("FAKE_NCCL_FAIL", "ncclCommWindowRegister:1:0"))
    try {
      const [r0, r1] = await settleAll((w) => w.alloc("f", [16], "float32", { group: "win", timeoutMs: 1_000 }))
      for (const r of [r0, r1]) {
        expect(r.error).toBeInstanceOf(NcclRegistrationError)
        expect(r.error).toMatchObject({ group: "win", message: expect.stringMatching(/ncclCommWindowRegister.*aborted its communicator.*destroy the group and create it again/) })
      }
      // Rank 1's own failure is named; rank 0's call ended at its limit.
      expect(r1.error?.message).toMatch(/rank 1 \(ncclCommWindowRegister:.*injected by the test double/)
      expect(r0.error?.message).toMatch(/timed out/)
    } finally {
      await take(ranks[1].setEnv("FAKE_NCCL_FAIL", null))
    }
    // Nobody deregistered alone (a collective call peers would not join); both aborted and freed their memory.
    expect(calls("ncclCommWindowDeregister")).toEqual([])
    expect(calls("ncclCommAbort")).toHaveLength(2)
    expect(calls("ncclMemFree")).toHaveLength(2)
    // The group created again works everywhere.
    await win.destroy()
    win = await cluster.createCollectiveGroup(ranks, { backend: "nccl", name: "win" })
    expect(await onAll((w) => w.alloc("g", [16], "float32", { group: "win" }))).toHaveLength(2)
    await onAll((w) => w.free(["g"]))
  })

  it("a window registration failing on every rank (a healthy communicator) is undone together: the communicator stays usable", async () => {
    await onAll((w) => w.setEnv("FAKE_NCCL_FAIL", "ncclCommWindowRegister:-1:0"))
    try {
      const failed = await settleAll((w) => w.alloc("h", [16], "float32", { group: "win", timeoutMs: 5_000 }))
      for (const r of failed) {
        expect(r.error).toBeInstanceOf(NcclRegistrationError)
        expect(r.error).toMatchObject({ group: "win", failedRanks: [0, 1], message: expect.stringContaining("every rank rolled back") })
      }
    } finally {
      await onAll((w) => w.setEnv("FAKE_NCCL_FAIL", null))
    }
    expect(calls("ncclCommAbort")).toEqual([])
    expect(calls("ncclMemFree")).toHaveLength(2)
    expect(await onAll((w) => w.alloc("i", [16], "float32", { group: "win" }))).toHaveLength(2)
    await onAll((w) => w.free(["i"]))
  })

  it("ncclMemAlloc failing on rank 0 stops every rank before the collective registration", async () => {
    await take(ranks[0].setEnv("FAKE_NCCL_FAIL", "ncclMemAlloc:-1:0"))
    try {
      const [r0, r1] = await settleAll((w) => w.alloc("m", [16], "float32", { group: "win" }))
      expect(r0.error).toBeInstanceOf(NcclError)
      expect(r1.error).toBeInstanceOf(NcclRegistrationError)
      expect(r1.error).toMatchObject({ failedRanks: [0], message: expect.stringContaining("ncclMemAlloc(64) failed") })
    } finally {
      await take(ranks[0].setEnv("FAKE_NCCL_FAIL", null))
    }
    expect(calls("ncclCommWindowRegister")).toEqual([])
    expect(calls("ncclMemFree")).toHaveLength(1)
  })
})

describe("nccl-window over a group that is not an nccl group (test doubles)", () => {
  it("bootstraps the heap's own communicator over the group's gather, and destroys it after its windows, with the last block", async () => {
    await onAll((w) => w.alloc("a", [8], "float32", { group: "heap", backend: "nccl-window" }))
    const inits = calls("ncclCommInitRankConfig")
    expect(inits).toHaveLength(2)
    expect(new Set(inits.map((l) => field(l, "id"))).size).toBe(1)
    expect((await onAll((w) => w.communicators())).map((c) => c.sort())).toEqual([
      ["heap/nccl-window", "win"],
      ["heap/nccl-window", "win"],
    ])
    expect((await take(ranks[0].deviceInfo("a"))).communicator).toBe("heap/nccl-window")
    // A second block reuses the communicator.
    await onAll((w) => w.alloc("b", [8], "float32", { group: "heap", backend: "nccl-window" }))
    expect(calls("ncclCommInitRankConfig")).toHaveLength(2)
    await onAll((w) => w.free(["a"]))
    expect(calls("ncclCommDestroy")).toEqual([])
    fs.rmSync(log, { force: true })
    await onAll((w) => w.free(["b"]))
    for (const rank of [0, 1]) {
      const mine = readLog(log).filter((l) => l.includes(`rank=${rank}`) || l.startsWith("ncclMemFree"))
      const order = mine.map((l) => l.split(" ")[0])
      expect(order.indexOf("ncclCommWindowDeregister")).toBeLessThan(order.indexOf("ncclCommDestroy"))
    }
    expect(calls("ncclMemFree")).toHaveLength(2)
    expect(await onAll((w) => w.communicators())).toEqual([["win"], ["win"]])
  })
})

describe("the version gate (test doubles reporting NCCL 2.27.0)", () => {
  it("refuses on every rank with NcclVersionError before allocating anything", async () => {
    const oldLog = folder.log("old")
    const old = await cluster.spawn(SymWorker, { count: 2, env: { ...env, FAKE_NCCL_LOG: oldLog, FAKE_NCCL_VERSION: "22700" } })
    await cluster.createCollectiveGroup(old, { backend: "nccl", name: "old" })
    const failed = await Promise.all(old.map((w) => rejection(take(w.alloc("v", [16], "float32", { group: "old" })))))
    for (const e of failed) {
      expect(e).toBeInstanceOf(NcclVersionError)
      expect(e).toMatchObject({ feature: "windows", required: "2.27.3", found: "2.27.0" })
    }
    expect(readLog(oldLog).filter((l) => l.startsWith("ncclMemAlloc"))).toEqual([])
  })
})
