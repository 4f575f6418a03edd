/**
 * The transport and the pools against TEST DOUBLES of libnccl.so.2 and libcudart.so
 * (test/double/fake_nccl.c, fake_cudart.c): "device memory" is host memory and NCCL calls are only
 * recorded, so what is checked here is what the code asks of NCCL (one group call per object, dtypes,
 * which segments are registered, in which order, rollbacks, aborts), never that bytes moved
 * between GPUs (the *.gpu.test.ts files do that on real GPUs). Two ranks live in this one process:
 * their groups are named "<group>#<rank>" and exchange blobs in memory.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { promisify } from "node:util"
import { Tensor } from "@tensorlane/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest"
import {
  NcclEffect,
  type NcclMemPool,
  type PoolGroup,
  allocateNcclMemory,
  communicatorDevice,
  createNcclMemPool,
  deregisterMemPool,
  deregisterNcclWindow,
  freeNcclMemory,
  memPoolWithoutRegistration,
  multiGroupMemPool,
  nccl,
  ncclMem,
  ncclStatus,
  registerMemPool,
  registerNcclWindow,
} from "../src/index.js"
import { buildDoubles, doublesFolder, readLog } from "./double/build.js"

const doubles = buildDoubles()
const folder = doublesFolder()
const LOG = folder.log("calls")
// Window calls wait for every rank, as NCCL's do.
Object.assign(process.env, doubles.env, folder.env, { FAKE_NCCL_LOG: LOG, FAKE_NCCL_COLLECTIVE: "1" })

/** In-memory all-gather among `worldSize` members, round by round (the control plane's role). */
const exchange = (worldSize: number) => {
  const rounds: Array<{ blobs: Array<Uint8Array>; arrived: number; done: Array<(b: Array<Uint8Array>) => void> }> = []
  const next = new Array<number>(worldSize).fill(0)
  return (rank: number) => (blob: Uint8Array) =>
    new Promise<ReadonlyArray<Uint8Array>>((resolve) => {
      const round = (rounds[next[rank]++] ??= { blobs: new Array(worldSize), arrived: 0, done: [] })
      round.blobs[rank] = blob
      round.done.push(resolve)
      if (++round.arrived === worldSize) for (const settle of round.done) settle(round.blobs)
    })
}

/** Creates the communicators of `group` for ranks 0..worldSize-1 and returns each rank's member. */
const createPair = async (group: string, worldSize = 2): Promise<Array<PoolGroup>> => {
  const setupGather = exchange(worldSize)
  const ranks = Array.from({ length: worldSize }, (_, rank) => rank)
  await Promise.all(
    ranks.map((rank) =>
      nccl.createGroup!({ name: `${group}#${rank}`, rank, worldSize, members: [], timeoutMs: 10_000, allGather: setupGather(rank) }),
    ),
  )
  const gather = exchange(worldSize)
  return ranks.map((rank) => ({ name: `${group}#${rank}`, rank, worldSize, allGather: gather(rank) }))
}

const calls = (prefix: string, rank?: number): Array<string> =>
  readLog(LOG).filter((l) => l.startsWith(`${prefix} `) && (rank === undefined || l.includes(`rank=${rank} `) || l.endsWith(`rank=${rank}`)))

const field = (line: string, name: string): string => new RegExp(`${name}=(\\S+)`).exec(line)?.[1] ?? ""
const hex = (address: bigint): string => `0x${address.toString(16)}`

beforeEach(() => {
  fs.rmSync(LOG, { force: true })
  delete process.env.FAKE_NCCL_FAIL
  delete process.env.FAKE_NCCL_HANG
  delete process.env.FAKE_NCCL_ABORT_MS
})
afterAll(() => folder.remove())

describe("the transport over the test double", () => {
  let dp: Array<PoolGroup>
  let setupCalls: Array<string>
  beforeAll(async () => {
    fs.rmSync(LOG, { force: true })
    dp = await createPair("xfer")
    setupCalls = readLog(LOG)
  })
  afterAll(async () => {
    await nccl.destroyGroup!("xfer#0")
    await nccl.destroyGroup!("xfer#1")
  })

  it("rank 0's unique id reaches every rank; communicators are non-blocking and polled until ready", () => {
    expect(setupCalls.filter((l) => l.startsWith("ncclGetUniqueId"))).toHaveLength(1)
    const inits = setupCalls.filter((l) => l.startsWith("ncclCommInitRankConfig"))
    expect(inits).toHaveLength(2)
    expect(new Set(inits.map((l) => field(l, "id"))).size).toBe(1)
    expect(inits.every((l) => field(l, "blocking") === "0" && field(l, "nranks") === "2")).toBe(true)
    const comms = ncclStatus().communicators.filter((c) => c.group.startsWith("xfer#"))
    expect(comms.map((c) => [c.group, c.rank, c.ready])).toEqual(
      expect.arrayContaining([
        ["xfer#0", 0, true],
        ["xfer#1", 1, true],
      ]),
    )
    expect(dp).toHaveLength(2)
  })

  it("device memory round-trips through cudaMemcpy, and storages carry { address, device }", () => {
    const t = Tensor.arange(10, { dtype: "float32" }).to("cuda:0")
    expect(t.device).toBe("cuda:0")
    expect(typeof (t.storage.handle as { address: bigint }).address).toBe("bigint")
    expect(() => t.storage.bytes).toThrow(expect.objectContaining({ _tag: "DeviceError" }))
    expect(Array.from(t.to("cpu").toArray())).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    // Freed device memory may be another allocation's by now: nothing reaches it through the old storage.
    t.storage.allocator.free(t.storage)
    expect(() => t.to("cpu")).toThrow(expect.objectContaining({ _tag: "ObjectFreedError" }))
    expect(() => t.storage.handle).toThrow(expect.objectContaining({ _tag: "ObjectFreedError" }))
  })

  it("all tensors of an object go inside one NCCL group call, as bytes; empty tensors are left out", async () => {
    const tensors = [Tensor.ones([4, 4]).to("cuda:0"), Tensor.zeros([0]).to("cuda:0"), Tensor.ones([3], { dtype: "bfloat16" }).to("cuda:0")]
    fs.rmSync(LOG, { force: true })
    await nccl.send!({ object: { objectId: "o1", tensors }, group: "xfer#0", toRank: 1, signal: new AbortController().signal })
    expect(readLog(LOG)).toEqual(["ncclGroupStart", "ncclSend rank=0 peer=1 count=64 dtype=1", "ncclSend rank=0 peer=1 count=6 dtype=1", "ncclGroupEnd"])
    fs.rmSync(LOG, { force: true })
    const into = tensors.map((t) => Tensor.empty(t.shape, { dtype: t.dtype, device: "cuda:0" }))
    const metas = tensors.map((t) => ({ dtype: t.dtype, shape: t.shape, device: t.device, nbytes: t.nbytes }))
    await nccl.receive!({
      objectId: "o1",
      producer: "a",
      producerAddress: "",
      consumer: "b",
      group: "xfer#1",
      fromRank: 0,
      tensors: metas as never,
      metadata: undefined,
      into,
      signal: new AbortController().signal,
    })
    expect(readLog(LOG)).toEqual(["ncclGroupStart", "ncclRecv rank=1 peer=0 count=64 dtype=1", "ncclRecv rank=1 peer=0 count=6 dtype=1", "ncclGroupEnd"])
  })

  it("a CPU tensor, a strided view or a group this process is not in are refused with typed errors", async () => {
    const signal = new AbortController().signal
    await expect(nccl.send!({ object: { objectId: "o2", tensors: [Tensor.ones([2])] }, group: "xfer#0", toRank: 1, signal })).rejects.toMatchObject({
      _tag: "DeviceError",
      device: "cpu",
      transport: "nccl",
    })
    const strided = Tensor.ones([4, 4]).to("cuda:0").transpose(0, 1)
    await expect(nccl.send!({ object: { objectId: "o3", tensors: [strided] }, group: "xfer#0", toRank: 1, signal })).rejects.toMatchObject({ _tag: "ShapeError" })
    await expect(nccl.send!({ object: { objectId: "o4", tensors: [] }, group: "nope", toRank: 1, signal })).rejects.toMatchObject({
      _tag: "MissingGroupError",
    })
  })

  it("allreduce uses NCCL's dtype (bfloat16 9, float8_e4m3fn 10) in place; int16 is refused", async () => {
    const signal = new AbortController().signal
    const tensors = [Tensor.ones([8], { dtype: "bfloat16" }).to("cuda:0"), Tensor.ones([8], { dtype: "float8_e4m3fn" }).to("cuda:0")]
    fs.rmSync(LOG, { force: true })
    await nccl.allreduce!({ group: "xfer#0", tensors, op: "max", signal })
    expect(readLog(LOG)).toEqual([
      "ncclGroupStart",
      "ncclAllReduce rank=0 count=8 dtype=9 op=2 inplace=1",
      "ncclAllReduce rank=0 count=8 dtype=10 op=2 inplace=1",
      "ncclGroupEnd",
    ])
    await expect(nccl.allreduce!({ group: "xfer#0", tensors: [Tensor.ones([2], { dtype: "int16" }).to("cuda:0")], op: "sum", signal })).rejects.toMatchObject({
      _tag: "DTypeError",
    })
    fs.rmSync(LOG, { force: true })
    await nccl.broadcast!({ group: "xfer#1", tensors: [Tensor.ones([2], { dtype: "int16" }).to("cuda:0")], root: 0, signal })
    expect(readLog(LOG)).toEqual(["ncclGroupStart", "ncclBroadcast rank=1 count=4 dtype=1 root=0 inplace=1", "ncclGroupEnd"])
  })
})

describe("timeouts and aborts end with ncclCommAbort", () => {
  const solo = async (name: string) => {
    const gather = exchange(1)
    await nccl.createGroup!({ name, rank: 0, worldSize: 1, members: [], timeoutMs: 10_000, allGather: gather(0) })
  }
  /** Sends one small CUDA tensor to rank 0 of the one-rank group `group`. */
  const sendOne = (group: string, objectId: string) =>
    nccl.send!({ object: { objectId, tensors: [Tensor.ones([4]).to("cuda:0")] }, group, toRank: 0, signal: new AbortController().signal })

  it("an aborted transfer aborts the communicator, which stays broken until the group is created again", async () => {
    await solo("hang")
    process.env.FAKE_NCCL_HANG = "ncclSend"
    process.env.FAKE_NCCL_ABORT_MS = "200"
    const controller = new AbortController()
    const tensors = [Tensor.ones([4]).to("cuda:0")]
    const sending = nccl.send!({ object: { objectId: "h1", tensors }, group: "hang", toRank: 0, signal: controller.signal })
    setTimeout(() => controller.abort(new Error("peer died")), 50)
    await expect(sending).rejects.toThrow("peer died")
    // Rejected only once NCCL stopped (ncclCommAbort returned): until then it may still write the buffers.
    expect(calls("ncclCommAbort", 0)).toHaveLength(1)
    expect(ncclStatus().communicators.find((c) => c.group === "hang")?.broken).toMatch(/aborted/)
    delete process.env.FAKE_NCCL_HANG
    await expect(nccl.send!({ object: { objectId: "h2", tensors }, group: "hang", toRank: 0, signal: new AbortController().signal })).rejects.toMatchObject({
      _tag: "TransferError",
      message: expect.stringMatching(/broken.*destroy the group and create it again/),
    })
    await nccl.destroyGroup!("hang")
    await solo("hang")
    await nccl.send!({ object: { objectId: "h3", tensors }, group: "hang", toRank: 0, signal: new AbortController().signal })
    await nccl.destroyGroup!("hang")
  })

  it("settings it does not accept are InvalidSettingErrors naming the variable: the wait limit and the device", async () => {
    await solo("setting")
    vi.stubEnv("TENSORLANE_NCCL_DEVICE", "cuda:1")
    vi.stubEnv("TENSORLANE_NCCL_WAIT_TIMEOUT_MS", "1.5")
    try {
      expect(() => communicatorDevice()).toThrow(expect.objectContaining({ _tag: "InvalidSettingError", variable: "TENSORLANE_NCCL_DEVICE", value: "cuda:1" }))
      await expect(sendOne("setting", "w1")).rejects.toMatchObject({ _tag: "InvalidSettingError", variable: "TENSORLANE_NCCL_WAIT_TIMEOUT_MS", value: "1.5" })
    } finally {
      vi.unstubAllEnvs()
      await nccl.destroyGroup!("setting")
    }
  })

  it("an NCCL wait past its limit is a TimeoutError and aborts the communicator", async () => {
    await solo("slow")
    process.env.FAKE_NCCL_HANG = "ncclSend"
    process.env.TENSORLANE_NCCL_WAIT_TIMEOUT_MS = "100"
    try {
      await expect(sendOne("slow", "s1")).rejects.toMatchObject({ _tag: "TimeoutError", timeoutMs: 100 })
      expect(calls("ncclCommAbort", 0)).toHaveLength(1)
    } finally {
      delete process.env.TENSORLANE_NCCL_WAIT_TIMEOUT_MS
      await nccl.destroyGroup!("slow")
    }
  })
})

describe("NCCL memory pools", () => {
  let dp: Array<PoolGroup>
  let tp: Array<PoolGroup>
  let pools: Array<NcclMemPool>
  beforeAll(async () => {
    dp = await createPair("dp")
    tp = await createPair("tp")
  })
  beforeEach(() => {
    pools = [0, 1].map((rank) => createNcclMemPool({ segmentBytes: 4096, name: `pool-${rank}`, symmetric: false }))
  })
  afterAll(async () => {
    for (const name of ["dp#0", "dp#1", "tp#0", "tp#1"]) await nccl.destroyGroup!(name)
  })

  const registeredPointers = (rank: number, api = "ncclCommRegister") => calls(api, rank).map((l) => field(l, "ptr"))

  it("keeps its bookkeeping: segments in allocation order, blocks reused after free, a growth limit", () => {
    const pool = createNcclMemPool({ segmentBytes: 4096, maxBytes: 3 * 4096 })
    const a = pool.allocate(1000)
    const b = pool.allocate(3000)
    expect(pool.segments.map((s) => s.byteLength)).toEqual([4096])
    expect(pool.used).toBe(1024 + 3072)
    const c = pool.allocate(5000)
    expect(pool.segments.map((s) => [s.index, s.byteLength])).toEqual([
      [0, 4096],
      [1, 8192],
    ])
    expect(calls("ncclMemAlloc").map((l) => field(l, "size"))).toEqual(["4096", "8192"])
    expect((c.handle as { address: bigint }).address).toBe(pool.segments[1].address)
    expect((b.handle as { address: bigint }).address).toBe(pool.segments[0].address + 1024n)
    pool.free(a)
    expect(pool.used).toBe(3072 + 5120)
    const d = pool.allocate(500)
    expect((d.handle as { address: bigint }).address).toBe(pool.segments[0].address)
    // `a`'s block is `d`'s now: nothing reaches it through `a`.
    expect(() => a.handle).toThrow(expect.objectContaining({ _tag: "ObjectFreedError" }))
    expect(() => pool.allocate(4096)).toThrow(expect.objectContaining({ _tag: "OutOfMemoryError" }))
    expect(() => createNcclMemPool({ segmentBytes: 4096 }).allocate(2 ** 53 - 1)).toThrow(expect.objectContaining({ _tag: "OutOfMemoryError" }))
    for (const maxBytes of [Number.NaN, -5, 1.5, "4096" as never]) {
      expect(() => createNcclMemPool({ maxBytes }), String(maxBytes)).toThrow(expect.objectContaining({ _tag: "ShapeError", message: expect.stringContaining("maxBytes") }))
    }
    expect(pool.allocate(0).byteLength).toBe(0)
    expect(() => pool.close()).toThrow(/in use/)
    for (const s of [b, c, d]) pool.free(s)
    expect(pool.used).toBe(0)
    pool.close()
    expect(calls("ncclMemFree")).toHaveLength(2)
  })

  it("closes with close(), `using` and the scope of NcclEffect.createNcclMemPool alike: its segments go back", async () => {
    {
      using pool = createNcclMemPool({ segmentBytes: 4096 })
      pool.free(pool.allocate(100))
    }
    expect(calls("ncclMemFree")).toHaveLength(1)
    const closed = await Effect.runPromise(
      Effect.scoped(
        Effect.map(NcclEffect.createNcclMemPool({ segmentBytes: 4096 }), (pool) => {
          pool.free(pool.allocate(100))
          return pool
        }),
      ),
    )
    expect(calls("ncclMemFree")).toHaveLength(2)
    expect(() => closed.allocate(8)).toThrow(expect.objectContaining({ _tag: "UnsupportedOperationError" }))
    // Still in use when its scope closes: the pool refuses to close, a defect of the release.
    const inUse = await Effect.runPromiseExit(Effect.scoped(Effect.map(NcclEffect.createNcclMemPool({ segmentBytes: 4096 }), (pool) => pool.allocate(100))))
    expect(Exit.isFailure(inUse) && Cause.hasDies(inUse.cause)).toBe(true)
  })

  it("registerMemPool registers only new segments, in allocation order, on every rank", async () => {
    for (const pool of pools) {
      pool.allocate(4096)
      pool.allocate(100)
    }
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, dp[rank])))
    for (const rank of [0, 1]) {
      expect(registeredPointers(rank)).toEqual(pools[rank].segments.map((s) => hex(s.address)))
    }
    for (const pool of pools) pool.allocate(9000)
    fs.rmSync(LOG, { force: true })
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, dp[rank])))
    for (const rank of [0, 1]) {
      expect(registeredPointers(rank)).toEqual([hex(pools[rank].segments[2].address)])
      expect([...pools[rank].registrations.get(`dp#${rank}`)!.keys()]).toEqual([0, 1, 2])
    }
    fs.rmSync(LOG, { force: true })
    await Promise.all(pools.map((pool, rank) => deregisterMemPool(pool, dp[rank])))
    expect(calls("ncclCommDeregister", 0)).toHaveLength(3)
    expect(pools[0].registrations.size).toBe(0)
    expect(ncclStatus().communicators.find((c) => c.group === "dp#0")?.registrations).toBe(0)
  })

  it("a failure on one rank is rolled back on every rank and raised everywhere", async () => {
    for (const pool of pools) {
      pool.allocate(4096)
      pool.allocate(4096)
    }
    process.env.FAKE_NCCL_FAIL = "ncclCommRegister:1:1"
    const results = await Promise.allSettled(pools.map((pool, rank) => registerMemPool(pool, dp[rank])))
    for (const r of results) {
      expect(r.status).toBe("rejected")
      expect((r as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", failedRanks: [1] })
    }
    expect((results[0] as PromiseRejectedResult).reason.message).toMatch(/failed on rank 1 \(ncclCommRegister of segment 1.*injected by the test double/)
    // Rank 0 registered both segments and rank 1 the first: each deregistered what it did.
    expect(calls("ncclCommRegister", 0).filter((l) => !l.endsWith("failed"))).toHaveLength(2)
    expect(calls("ncclCommDeregister", 0)).toHaveLength(2)
    expect(calls("ncclCommDeregister", 1)).toHaveLength(1)
    for (const rank of [0, 1]) {
      expect(pools[rank].registrations.get(`dp#${rank}`)?.size ?? 0).toBe(0)
      expect(ncclStatus().communicators.find((c) => c.group === `dp#${rank}`)?.registrations).toBe(0)
    }
    delete process.env.FAKE_NCCL_FAIL
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, dp[rank])))
    expect(ncclStatus().communicators.find((c) => c.group === "dp#1")?.registrations).toBe(2)
    await Promise.all(pools.map((pool, rank) => deregisterMemPool(pool, dp[rank])))
  })

  it("a rank-local refusal (another device, buffers vs windows) fails every rank in the same round, rounds kept in step", async () => {
    for (const pool of pools) pool.allocate(4096)
    const elsewhere = createNcclMemPool({ device: "cuda:1", segmentBytes: 4096 })
    const [onOne, onZero] = await Promise.allSettled([registerMemPool(pools[0], dp[0]), registerMemPool(elsewhere, dp[1])])
    expect((onZero as PromiseRejectedResult).reason).toMatchObject({ _tag: "MissingGroupError", message: expect.stringMatching(/cuda:1/) })
    expect((onOne as PromiseRejectedResult).reason).toMatchObject({
      _tag: "NcclRegistrationError",
      failedRanks: [1],
      message: expect.stringMatching(/rank 1 refused \(.*cuda:1.*\); nothing was registered/),
    })
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, dp[rank])))
    const [asWindows, asBuffers] = await Promise.allSettled([registerMemPool(pools[0], dp[0], { symmetric: true }), registerMemPool(pools[1], dp[1])])
    expect((asWindows as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", message: expect.stringMatching(/as buffers; deregisterMemPool/) })
    expect((asBuffers as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", failedRanks: [0] })
    expect(calls("ncclCommWindowRegister")).toEqual([])
    // Still in step: the next collective call pairs up on both ranks.
    await Promise.all(pools.map((pool, rank) => deregisterMemPool(pool, dp[rank])))
    expect(calls("ncclCommDeregister")).toHaveLength(2)
  })

  it("symmetric registration (windows) needs every rank to plan the same segments, else nothing happens", async () => {
    pools[0].allocate(4096)
    pools[0].allocate(4096)
    pools[1].allocate(4096)
    const results = await Promise.allSettled(pools.map((pool, rank) => registerMemPool(pool, tp[rank], { symmetric: true })))
    for (const r of results) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", failedRanks: [] })
      expect((r as PromiseRejectedResult).reason.message).toMatch(/disagree.*rank 0: register 2 segment.*rank 1: register 1 segment/)
    }
    expect(calls("ncclCommWindowRegister")).toEqual([])
  })

  it("windows register in lockstep: a rank failing one aborts every rank's communicator, never a rollback peers cannot join", async () => {
    const wf = await createPair("wfail")
    const symmetric = [0, 1].map(() => createNcclMemPool({ segmentBytes: 4096, symmetric: true }))
    for (const pool of symmetric) {
      pool.allocate(4096)
      pool.allocate(4096)
    }
    process.env.FAKE_NCCL_FAIL = "ncclCommWindowRegister:1:1"
    const results = await Promise.allSettled(symmetric.map((pool, rank) => registerMemPool(pool, wf[rank], { timeoutMs: 300 })))
    for (const r of results) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({
        _tag: "NcclRegistrationError",
        failedRanks: [0, 1],
        message: expect.stringMatching(/ncclCommWindowRegister of segment 1.*injected.*aborted its communicator.*destroy the group and create it again/),
      })
    }
    // Rank 0 waited in segment 1's collective call until its limit; nobody then deregistered segment 0 alone.
    expect(calls("ncclCommWindowRegister", 0)).toHaveLength(2)
    expect(calls("ncclCommWindowDeregister")).toEqual([])
    const broken = (rank: number) => ncclStatus().communicators.find((c) => c.group === `wfail#${rank}`)?.broken
    expect(broken(0)).toMatch(/ncclCommWindowRegister in group "wfail#0" timed out/)
    expect(broken(1)).toMatch(/failed on rank 0 .* rank 1/)
    for (const rank of [0, 1]) {
      expect(symmetric[rank].registrations.size).toBe(0)
      await nccl.destroyGroup!(`wfail#${rank}`)
    }
  })

  it("windows register in lockstep: when every rank's NCCL refuses the same segment, all undo together and stay usable", async () => {
    const symmetric = [0, 1].map(() => createNcclMemPool({ segmentBytes: 4096, symmetric: true }))
    for (const pool of symmetric) {
      pool.allocate(4096)
      pool.allocate(4096)
    }
    // Both ranks' segment 0 succeed (two calls), then both ranks' segment 1 is refused.
    process.env.FAKE_NCCL_FAIL = "ncclCommWindowRegister:-1:2"
    const results = await Promise.allSettled(symmetric.map((pool, rank) => registerMemPool(pool, tp[rank], { timeoutMs: 2000 })))
    delete process.env.FAKE_NCCL_FAIL
    for (const r of results) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", failedRanks: [0, 1], message: expect.stringMatching(/every rank rolled back/) })
    }
    for (const rank of [0, 1]) {
      expect(calls("ncclCommWindowDeregister", rank)).toHaveLength(1)
      expect(ncclStatus().communicators.find((c) => c.group === `tp#${rank}`)).toMatchObject({ broken: undefined, windows: 0 })
    }
    await Promise.all(symmetric.map((pool, rank) => registerMemPool(pool, tp[rank])))
    await Promise.all(symmetric.map((pool, rank) => deregisterMemPool(pool, tp[rank])))
    expect(calls("ncclCommWindowRegister").filter((l) => !l.endsWith("failed"))).toHaveLength(6)
  })

  it("windows are registered with the window API and deregistered with it", async () => {
    for (const pool of pools) pool.allocate(4096)
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, tp[rank], { symmetric: true })))
    expect(calls("ncclCommWindowRegister", 0).map((l) => field(l, "flags"))).toEqual(["1"])
    expect(calls("ncclCommRegister")).toEqual([])
    const mixed = await Promise.allSettled(pools.map((pool, rank) => registerMemPool(pool, tp[rank], { symmetric: false })))
    for (const r of mixed) expect((r as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", message: expect.stringMatching(/as windows/) })
    await Promise.all(pools.map((pool, rank) => deregisterMemPool(pool, tp[rank])))
    expect(calls("ncclCommWindowDeregister", 0)).toHaveLength(1)
  })

  it("ncclMem allocates from the pool inside run() and registers on exit; reregister mode deregisters on enter", async () => {
    await Promise.all(
      pools.map(async (pool, rank) => {
        await using mem = await ncclMem(pool, { group: dp[rank] })
        const t = mem.run(() => Tensor.zeros([1024], { device: "cuda:0" }))
        expect(t.storage.allocator).toBe(pool)
        expect(calls("ncclCommRegister", rank)).toEqual([])
      }),
    )
    expect(registeredPointers(0)).toEqual([hex(pools[0].segments[0].address)])
    fs.rmSync(LOG, { force: true })
    await Promise.all(
      pools.map(async (pool, rank) => {
        await using mem = await ncclMem(pool, { group: dp[rank], mode: "reregister" })
        expect(calls("ncclCommDeregister", rank)).toHaveLength(1)
        mem.run(() => Tensor.zeros([2048], { device: "cuda:0" }))
      }),
    )
    expect(calls("ncclCommRegister", 0)).toHaveLength(2)
    await Promise.all(pools.map((pool, rank) => deregisterMemPool(pool, dp[rank])))
  })

  it("reregister mode: when deregistering a later group fails, the earlier groups are registered again", async () => {
    for (const pool of pools) pool.allocate(4096)
    await Promise.all(pools.flatMap((pool, rank) => [registerMemPool(pool, dp[rank]), registerMemPool(pool, tp[rank])]))
    fs.rmSync(LOG, { force: true })
    // dp (first in canonical order) deregisters on both ranks; tp fails on rank 1.
    process.env.FAKE_NCCL_FAIL = "ncclCommDeregister:1:1"
    const results = await Promise.allSettled(pools.map((pool, rank) => multiGroupMemPool(pool, [tp[rank], dp[rank]], { mode: "reregister" })))
    delete process.env.FAKE_NCCL_FAIL
    for (const r of results) expect((r as PromiseRejectedResult).reason).toMatchObject({ _tag: "NcclRegistrationError", group: expect.stringMatching(/^tp#/), failedRanks: [1] })
    for (const rank of [0, 1]) {
      expect([...pools[rank].registrations.keys()].sort()).toEqual([`dp#${rank}`, `tp#${rank}`])
      expect(ncclStatus().communicators.find((c) => c.group === `dp#${rank}`)?.registrations).toBe(1)
    }
    expect(registeredPointers(0)).toEqual([hex(pools[0].segments[0].address), hex(pools[0].segments[0].address)])
    await Promise.all(pools.flatMap((pool, rank) => [deregisterMemPool(pool, dp[rank]), deregisterMemPool(pool, tp[rank])]))
  })

  it("multiGroupMemPool registers with every group in one canonical order, whatever order each rank gives", async () => {
    const orders = [
      [tp[0], dp[0]],
      [dp[1], tp[1]],
    ]
    await Promise.all(
      pools.map(async (pool, rank) => {
        await using mem = await multiGroupMemPool(pool, orders[rank])
        mem.run(() => Tensor.zeros([16], { device: "cuda:0" }))
      }),
    )
    const lines = readLog(LOG).filter((l) => l.startsWith("ncclCommRegister"))
    expect(lines).toHaveLength(4)
    for (const rank of [0, 1]) {
      expect([...pools[rank].registrations.keys()]).toEqual([`dp#${rank}`, `tp#${rank}`])
    }
    await Promise.all(pools.flatMap((pool, rank) => [deregisterMemPool(pool, dp[rank]), deregisterMemPool(pool, tp[rank])]))
  })

  it("by default pools register as windows (Megatron's symmetric=True), through registerMemPool and the scopes", async () => {
    const megatron = [0, 1].map((rank) => createNcclMemPool({ segmentBytes: 4096, name: `megatron-${rank}` }))
    expect(megatron[0].symmetric).toBeUndefined()
    await Promise.all(
      megatron.map(async (pool, rank) => {
        await using mem = await multiGroupMemPool(pool, [tp[rank]])
        mem.run(() => Tensor.zeros([16], { device: "cuda:0" }))
      }),
    )
    await Promise.all(
      megatron.map(async (pool, rank) => {
        await using mem = await ncclMem(pool, { group: tp[rank] })
        mem.run(() => Tensor.zeros([4096], { device: "cuda:0" }))
      }),
    )
    for (const pool of megatron) pool.allocate(4096)
    await Promise.all(megatron.map((pool, rank) => registerMemPool(pool, tp[rank])))
    expect(calls("ncclCommWindowRegister", 0).map((l) => field(l, "flags"))).toEqual(["1", "1", "1"])
    expect(calls("ncclCommRegister")).toEqual([])
    await Promise.all(megatron.map((pool, rank) => deregisterMemPool(pool, tp[rank])))
  })

  it("with an NCCL older than 2.27.3 the default falls back to buffers; asking for windows is an NcclVersionError", async () => {
    const script = `
      import { createNcclMemPool, nccl, registerMemPool, ncclStatus } from "@tensorlane/transport-nccl"
      await nccl.createGroup({ name: "old", rank: 0, worldSize: 1, members: [], timeoutMs: 10000, allGather: async (b) => [b] })
      const member = { name: "old", rank: 0, worldSize: 1, allGather: async (b) => [b] }
      const pool = createNcclMemPool({ segmentBytes: 4096 })
      pool.allocate(10)
      await registerMemPool(pool, member)
      const kinds = [...pool.registrations.get("old").values()].map((r) => r.kind)
      const windows = await registerMemPool(createNcclMemPool({ symmetric: true }), member).catch((e) => e._tag)
      console.log(JSON.stringify({ version: ncclStatus().version, kinds, windows }))
      process.exit(0)
    `
    const repo = new URL("../../..", import.meta.url).pathname
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      cwd: repo,
      env: { ...process.env, FAKE_NCCL_VERSION: "22702", FAKE_NCCL_LOG: "" },
    })
    expect(JSON.parse(stdout)).toEqual({ version: "2.27.2", kinds: ["buffer"], windows: "NcclVersionError" })
  })

  it("a disabled scope and memPoolWithoutRegistration register nothing", async () => {
    {
      await using off = await ncclMem(pools[0], { group: dp[0], enabled: false })
      expect(off.allocator).toBeUndefined()
      expect(off.run(() => Tensor.zeros([4], { device: "cuda:0" })).storage.allocator).not.toBe(pools[0])
    }
    {
      await using plain = memPoolWithoutRegistration(pools[0])
      expect(plain.run(() => Tensor.zeros([4], { device: "cuda:0" })).storage.allocator).toBe(pools[0])
    }
    expect(calls("ncclCommRegister")).toEqual([])
    expect(pools[0].registrations.size).toBe(0)
  })

  it("registering with a group this process has no communicator for is a MissingGroupError", async () => {
    await expect(registerMemPool(pools[0], { name: "gloo-1", rank: 0, worldSize: 1, allGather: async (b) => [b] })).rejects.toMatchObject({
      _tag: "MissingGroupError",
    })
  })

  it("destroying a group deregisters its windows with the window API before the communicator goes", async () => {
    const [solo] = await createPair("windows", 1)
    const pool = createNcclMemPool({ segmentBytes: 4096 })
    pool.allocate(10)
    await registerMemPool(pool, solo, { symmetric: true })
    fs.rmSync(LOG, { force: true })
    await nccl.destroyGroup!("windows#0")
    expect(readLog(LOG).map((l) => l.split(" ")[0])).toEqual(["ncclCommWindowDeregister", "ncclCommFinalize", "ncclCommDestroy"])
  })

  it("destroying a group deregisters the windows left on every rank in reverse registration order, whatever their handles", async () => {
    const ranks = await createPair("teardown")
    const pools = ranks.map(() => createNcclMemPool({ segmentBytes: 4096 }))
    for (const pool of pools) {
      pool.allocate(10)
      pool.allocate(8192)
    }
    await Promise.all(pools.map((pool, rank) => registerMemPool(pool, ranks[rank], { symmetric: true })))
    fs.rmSync(LOG, { force: true })
    // The double complements rank 1's window handles, so their order is the reverse of rank 0's: a
    // teardown in handle order would make the ranks' collective calls differ, which the double fails.
    await Promise.all(ranks.map((member) => nccl.destroyGroup!(member.name)))
    for (const rank of [0, 1]) {
      expect(calls("ncclCommWindowDeregister", rank).map((l) => field(l, "size"))).toEqual(["8192", "4096"])
    }
  })

  it("registrations end with their group: the pool can be destroyed, or registered with the group created again", async () => {
    let [solo] = await createPair("renew", 1)
    const pool = createNcclMemPool({ segmentBytes: 4096, symmetric: false })
    const block = pool.allocate(10)
    await registerMemPool(pool, solo)
    await nccl.destroyGroup!("renew#0")
    ;[solo] = await createPair("renew", 1)
    fs.rmSync(LOG, { force: true })
    await registerMemPool(pool, solo)
    expect(registeredPointers(0)).toEqual([hex(pool.segments[0].address)])
    await deregisterMemPool(pool, solo)
    expect(calls("ncclCommDeregister", 0)).toHaveLength(1)
    await registerMemPool(pool, solo)
    await nccl.destroyGroup!("renew#0")
    pool.free(block)
    pool.close()
    expect(pool.registrations.size).toBe(0)
    expect(calls("ncclMemFree")).toHaveLength(1)
  })

  it("the window API for symmetric-mem: ncclMemAlloc'd storage registered as a window and back", async () => {
    const [solo] = await createPair("win-api", 1)
    const storage = allocateNcclMemory("cuda:0", 8192)
    expect(storage.allocator.name).toBe("nccl-mem:cuda:0")
    expect(calls("ncclMemAlloc").map((l) => field(l, "size"))).toEqual(["8192"])
    const window = await registerNcclWindow(solo.name, storage)
    expect(window).toMatchObject({ group: "win-api#0", address: (storage.handle as { address: bigint }).address, byteLength: 8192 })
    expect(calls("ncclCommWindowRegister", 0).map((l) => [field(l, "ptr"), field(l, "flags")])).toEqual([[hex(window.address), "1"]])
    expect(ncclStatus().communicators.find((c) => c.group === "win-api#0")?.windows).toBe(1)
    await deregisterNcclWindow(window)
    expect(calls("ncclCommWindowDeregister", 0)).toHaveLength(1)
    freeNcclMemory(storage)
    expect(calls("ncclMemFree").map((l) => field(l, "ptr"))).toEqual([hex(window.address)])
    await nccl.destroyGroup!("win-api#0")
  })
})

describe("the teardown of a worker's environment", () => {
  it("leaves an operation the worker started to end without it: the process survives the end, which settles nothing", async () => {
    // In a process of its own (a crash there must fail the test, not take the runner down); glibc
    // fills freed blocks with 0xa5 at once, so that touching the ended worker's freed thread-safe
    // function crashes reliably (it did: SIGABRT).
    const env = { ...process.env, FAKE_NCCL_HANG: "ncclSend", GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" }
    const fixture = new URL("./fixtures/teardown.mjs", import.meta.url).pathname
    const outcome = await new Promise<{ code: number | null; signal: string | null; stdout: string }>((resolve) => {
      execFile(process.execPath, [fixture], { env, timeout: 50_000 }, (error, stdout) =>
        resolve({ code: error === null ? 0 : (error.code as number | null), signal: error?.signal ?? null, stdout }),
      )
    })
    expect(outcome).toMatchObject({ code: 0, signal: null })
    expect(JSON.parse(outcome.stdout)).toEqual({ broken: 'ncclSend to rank 0 in group "teardown" timed out' })
  })
})
