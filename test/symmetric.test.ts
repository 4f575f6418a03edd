/**
 * Symmetric memory through the real runtime (seed 002, nvmath-python's allocate_symmetric_memory /
 * free_symmetric_memory), with the shm backend: actor processes of one shm group allocate together,
 * sizes are agreed (and refused without makeSymmetric), peers write into each other's copies, frees
 * are checked for order, views, foreign tensors and double frees, symmetric tensors travel as
 * method results, and nothing is left in /dev/shm, not even after a rank is killed. Failures in the
 * actors reach the driver as their own classes (the packages register them with core).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import {
  type ActorHandle,
  ActorDiedError,
  type Cluster,
  type CollectiveGroup,
  type Device,
  DTypeError,
  DeviceError,
  type GetOptions,
  MissingGroupError,
  type ObjectRef,
  ObjectFreedError,
  OutOfMemoryError,
  ShapeError,
  Tensor,
  TimeoutError,
  UnsupportedOperationError,
  start,
} from "@tensorlane/core"
import { SymmetricBackendError, SymmetricFreeError, SymmetricMismatchError } from "@tensorlane/symmetric-mem"
import { NoCudaDeviceError } from "@tensorlane/transport-nccl"
import { buildFakeCudaDriver, fakeCudaCalls } from "../packages/symmetric-mem/test/doubles/build.ts"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { SymWorker } from "./fixtures/symmetricActors.mjs"
import { eventually, expectClean, rejection, sleep, take as takeFrom } from "./helpers.ts"

const SYMMETRIC = "@tensorlane/symmetric-mem"

let cluster: Cluster
let a: ActorHandle<typeof SymWorker>
let b: ActorHandle<typeof SymWorker>
let c: ActorHandle<typeof SymWorker>
let group: CollectiveGroup
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

/** Our segments in /dev/shm (the names start so; see src/internal/settings.ts). */
const shmEntries = (): Array<string> => fs.readdirSync("/dev/shm").filter((n) => n.startsWith("tensorlane-sym-"))

/** Runs the same call on every member at once (collective calls block until all arrive). */
const onAll = <A>(call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<A>): Promise<Array<A>> =>
  Promise.all([a, b, c].map((w, rank) => take(call(w, rank))))

/** The error a call failed with (it must fail). */
const failureOf = (ref: ObjectRef<unknown>): Promise<Error> => rejection(take(ref)) as Promise<Error>

/** onAll for calls that fail on every member: each member's error. */
const failuresOnAll = (call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<unknown>): Promise<Array<Error>> =>
  Promise.all([a, b, c].map((w, rank) => failureOf(call(w, rank))))

/** What a call returned, or the error it failed with. */
const settle = <A>(ref: ObjectRef<A>): Promise<A | Error> => take(ref).catch((error: Error) => error)

/** onAll for calls that may fail on some members only: each member's value or error. */
const settledOnAll = <A>(call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<A>): Promise<Array<A | Error>> =>
  Promise.all([a, b, c].map((w, rank) => settle(call(w, rank))))

/** Whether no member failed (for retries until a release has reached the producer). */
const noneFailed = (results: Array<unknown>): boolean => results.every((r) => !(r instanceof Error))

beforeAll(async () => {
  cluster = await start({ transports: [SYMMETRIC] })
  // NVSHMEM's unique-id bootstrap opens sockets: loopback only.
  ;[a, b, c] = await cluster.spawn(SymWorker, { count: 3, env: { NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME: "lo" } })
  group = await cluster.createCollectiveGroup([a, b, c], { backend: "shm", name: "sym" })
}, 60_000)

afterAll(async () => {
  await group?.destroy()
  await cluster?.shutdown()
})
afterEach(async () => {
  await expectClean(cluster)
})

describe("allocateSymmetric / freeSymmetric over the shm backend", () => {
  it("the heap is mapped by every rank and already unlinked: nothing of it is in /dev/shm", () => {
    expect(shmEntries()).toEqual([])
  })

  it("agrees sizes with one gather, and peers read and write each other's copies one-sidedly", async () => {
    const made = await onAll((w) => w.alloc("x", [3, 3], "float32", { group: "sym" }))
    for (const m of made) expect(m).toEqual({ shape: [3, 3], nbytes: 36, storageBytes: 36, symmetric: true })
    await onAll((w, rank) => w.fill("x", rank + 1))
    // Rank 0 reads rank 2's copy in place, then writes into rank 1's copy: rank 1 sees it in its own tensor.
    const peer = await take(a.readPeer("x", 2))
    expect(peer.values).toEqual(new Array(9).fill(3))
    expect(await take(a.writePeer("x", 1, 42))).toBeUndefined()
    expect((await take(b.read("x"))).values).toEqual(new Array(9).fill(42))
    expect((await take(c.read("x"))).values).toEqual(new Array(9).fill(3))
    expect(await onAll((w) => w.free(["x"]))).toEqual([[false], [false], [false]])
  })

  it("seed 002: makeSymmetric gives every rank a buffer of the largest size and a tensor of exactly its own shape", async () => {
    const shapes = [[3, 3], [2, 3], [1, 3]]
    const made = await onAll((w, rank) => w.alloc("m", shapes[rank], "float32", { group: "sym", makeSymmetric: true }))
    // Padding is never visible: the storage covers the rank's own bytes only.
    made.forEach((m, rank) => expect(m).toEqual({ shape: shapes[rank], nbytes: shapes[rank][0] * 12, storageBytes: shapes[rank][0] * 12, symmetric: true }))
    await onAll((w, rank) => w.fill("m", 10 * (rank + 1)))
    // A peer's copy has that peer's shape.
    const fromC = await take(c.readPeer("m", 0))
    expect(fromC).toMatchObject({ shape: [3, 3], values: new Array(9).fill(10) })
    expect(await take(a.readPeer("m", 1))).toMatchObject({ shape: [2, 3], values: new Array(6).fill(20) })
    await onAll((w) => w.free(["m"]))
  })

  it("without makeSymmetric, different sizes fail on every rank with the sizes named", async () => {
    const shapes = [[3, 3], [2, 3], [3, 3]]
    const failed = await failuresOnAll((w, rank) => w.alloc("bad", shapes[rank], "float32", { group: "sym" }))
    for (const e of failed) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "size", group: "sym", message: expect.stringContaining("rank 1: float32 [2, 3] = 24 bytes") })
      expect(e.message).toContain("makeSymmetric")
    }
    // The failed call counted on every rank alike: the next one lines up.
    const next = await onAll((w) => w.alloc("ok", [4], "int64", { group: "sym" }))
    for (const m of next) expect(m.nbytes).toBe(32)
    await onAll((w) => w.free(["ok"]))
  })

  it("a local refusal (a bad shape on one rank) fails the call on the others too, instead of leaving them waiting", async () => {
    const made = await failuresOnAll((w, rank) => w.alloc("shape", rank === 2 ? [-1] : [2], "float32", { group: "sym" }))
    expect(made[2]).toBeInstanceOf(ShapeError)
    for (const e of made.slice(0, 2)) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 2 refused") })
    }
    const dtypes = await failuresOnAll((w, rank) => w.alloc("dtype", [2], rank === 1 ? "float33" : "float32", { group: "sym" }))
    expect(dtypes[1]).toBeInstanceOf(DTypeError)
    for (const e of [dtypes[0], dtypes[2]]) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 1 refused") })
    }
  })

  it("skipSymmetricCheck on some ranks only fails every rank in the same round, allocates nothing, and the next call lines up", async () => {
    // A limit, so that a rank left waiting in a gather shows as a TimeoutError instead of a hang.
    const options = { group: "sym", timeoutMs: 5_000 }
    const mixed = await failuresOnAll((w, rank) => w.alloc("mixed", [4], "float32", { ...options, ...(rank === 0 ? { skipSymmetricCheck: true } : {}) }))
    for (const e of mixed) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ _tag: "SymmetricMismatchError", what: "options", group: "sym" })
      expect(e.message).toContain("skipSymmetricCheck differs across ranks: rank 0 true, rank 1 false, rank 2 false")
    }
    expect(shmEntries()).toEqual([])
    // Nothing was allocated on any rank (their heaps are alike), so a consistent call works, with or without the check.
    for (const skipSymmetricCheck of [false, true]) {
      expect(await onAll((w) => w.alloc("after", [4], "float32", { ...options, skipSymmetricCheck }))).toEqual(
        Array.from({ length: 3 }, () => ({ shape: [4], nbytes: 16, storageBytes: 16, symmetric: true })),
      )
      expect(await onAll((w) => w.free(["after"], { timeoutMs: 5_000 }))).toEqual([[false], [false], [false]])
    }
    // Sizes are gathered anyway, so unequal ones are refused even when every rank skips the check.
    const unequal = await failuresOnAll((w, rank) => w.alloc("unequal", [rank + 1], "float32", { ...options, skipSymmetricCheck: true }))
    for (const e of unequal) expect(e).toMatchObject({ _tag: "SymmetricMismatchError", what: "size" })
    expect(shmEntries()).toEqual([])
  })

  it("free order is checked: ranks that free different allocations all fail, and nothing is freed", async () => {
    await onAll((w) => w.alloc("p", [8], "float32", { group: "sym" }))
    await onAll((w) => w.alloc("q", [8], "float32", { group: "sym" }))
    const swapped = await failuresOnAll((w, rank) => w.free(rank === 1 ? ["q", "p"] : ["p", "q"]))
    for (const e of swapped) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "order", message: expect.stringContaining("rank 1: #") })
    }
    // Still allocated and usable; the right order frees both.
    expect((await take(b.read("q"))).nbytes).toBe(32)
    expect(await onAll((w) => w.free(["p", "q"]))).toEqual(Array.from({ length: 3 }, () => [false, false]))
  })

  it("a bad free (a view, a peer's copy, a double free) on one rank fails every rank of its group in the same round; the next free lines up", async () => {
    await onAll((w) => w.alloc("d", [2, 2], "float64", { group: "sym" }))
    await onAll((w) => w.alloc("e", [2], "float64", { group: "sym" }))
    // A limit, so that a rank left waiting in the gather shows as a TimeoutError instead of a hang.
    const limit = { timeoutMs: 5_000 }
    const view = await failuresOnAll((w, rank) => (rank === 0 ? w.freeView("d", limit) : w.free(["d"], limit)))
    expect(view[0]).toBeInstanceOf(SymmetricFreeError)
    expect(view[0]).toMatchObject({ reason: "view", message: expect.stringContaining("a view of symmetric allocation") })
    for (const e of view.slice(1)) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 0 refused: the tensor is a view") })
    }
    const peer = await failuresOnAll((w, rank) => (rank === 2 ? w.freePeer("d", 1, limit) : w.free(["d"], limit)))
    expect(peer[2]).toBeInstanceOf(SymmetricFreeError)
    expect(peer[2]).toMatchObject({ reason: "view", message: expect.stringContaining("a peer's copy") })
    for (const e of peer.slice(0, 2)) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 2 refused") })
    }
    // Nothing was freed, and every rank's calls still line up: the right free works everywhere.
    expect(await onAll((w) => w.free(["d"], limit))).toEqual([[false], [false], [false]])
    // A double free on rank 1 while the others free e: every rank fails, e stays allocated.
    const twice = await failuresOnAll((w, rank) => w.free([rank === 1 ? "d" : "e"], limit))
    expect(twice[1]).toBeInstanceOf(SymmetricFreeError)
    expect(twice[1]).toMatchObject({ reason: "double-free" })
    for (const e of [twice[0], twice[2]]) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 1 refused") })
    }
    expect((await take(c.read("e"))).nbytes).toBe(16)
    expect(await onAll((w) => w.free(["e"], limit))).toEqual([[false], [false], [false]])
    // A foreign tensor names no group: it fails on its own rank, at once, and takes no round.
    const foreign = await failureOf(a.freeForeign())
    expect(foreign).toBeInstanceOf(SymmetricFreeError)
    expect(foreign).toMatchObject({ reason: "foreign" })
    await onAll((w) => w.alloc("f", [1], "float32", { group: "sym" }))
    // An array of tensors is no tensor (it was taken for options, and nothing was freed): refused on each rank.
    for (const refused of await Promise.all([a, b, c].map((w) => failureOf(w.freeAsArray("f"))))) {
      expect(refused).toMatchObject({ _tag: "SymmetricFreeError", reason: "foreign", message: expect.stringContaining("freeSymmetric(...tensors)") })
    }
    expect(await onAll((w) => w.free(["f"], limit))).toEqual([[false], [false], [false]])
    const freed = await failureOf(b.readFreed("d"))
    expect(freed).toBeInstanceOf(ObjectFreedError)
    expect(freed.message).toContain("freeSymmetric")
  })

  it("the Effect face allocates for a scope and frees collectively when it closes; typed failures stay typed", async () => {
    expect(await onAll((w) => w.effectScoped("sym", [5]))).toEqual(Array.from({ length: 3 }, () => ({ during: true, after: false })))
    const mismatched = await onAll((w, rank) => w.effectScoped("sym", [5 + rank]))
    for (const r of mismatched) expect(r).toEqual({ during: "SymmetricMismatchError", after: undefined })
    const noGroup = await failureOf(a.alloc("nogroup", [2], "float32", {} as never))
    expect(noGroup).toBeInstanceOf(UnsupportedOperationError)
    expect(noGroup.message).toContain("needs { group }")
  })

  it("a symmetric tensor collected without freeSymmetric raises a warning naming the allocation", async () => {
    const warnings = await onAll((w) => w.leak("sym"))
    for (const w of warnings) {
      expect(w).toHaveLength(1)
      expect(w[0]).toMatch(/^SymmetricMemoryWarning: symmetric allocation #\d+ \(int32 \[7, 5\], 140 bytes per rank\) of group "sym" on shm was garbage-collected without freeSymmetric/)
    }
  })

  it("symmetric tensors are ordinary tensors: returned by methods over object-store and over shm", async () => {
    await onAll((w) => w.alloc("r", [4, 2], "int32", { group: "sym" }))
    await onAll((w, rank) => w.fill("r", rank + 5))
    const viaStore = b.give("r")
    expect((await cluster.get(viaStore)) as Tensor).toMatchObject({ shape: [4, 2] })
    expect(await take(c.sum(viaStore))).toBe(6 * 8)
    viaStore.release()
    const viaShm = c.giveShm("r")
    expect(await take(a.sum(viaShm))).toBe(7 * 8)
    expect(((await cluster.get(viaShm)) as Tensor).toArray()).toEqual(new Array(8).fill(7))
    viaShm.release()
    // The release reaches the producer as a message: until then the free is refused (below).
    expect(await eventually(() => settledOnAll((w) => w.free(["r"])), noneFailed)).toEqual([[false], [false], [false]])
  })

  it("a block still exported over shm (its object not released) cannot be freed: every rank fails, consumers keep reading its data, and the free works after release", async () => {
    await onAll((w) => w.alloc("x", [4], "int32", { group: "sym" }))
    await onAll((w, rank) => w.fill("x", rank + 1))
    const own = b.giveShm("x")
    expect(await take(c.sum(own))).toBe(8)
    const refused = await failuresOnAll((w) => w.free(["x"]))
    expect(refused[1]).toBeInstanceOf(SymmetricFreeError)
    expect(refused[1]).toMatchObject({ reason: "exported", message: expect.stringContaining("still exported for in-place reads by") })
    for (const e of [refused[0], refused[2]]) {
      expect(e).toBeInstanceOf(SymmetricMismatchError)
      expect(e).toMatchObject({ what: "peer", message: expect.stringContaining("rank 1 refused") })
    }
    // Nothing was freed, so a new allocation cannot take the block: the consumer still reads rank 1's data.
    await onAll((w) => w.alloc("y", [4], "int32", { group: "sym" }))
    await onAll((w) => w.fill("y", 9))
    expect(await take(a.sum(own))).toBe(8)
    // A peer's copy exported by another rank blocks the free too.
    const peer = a.givePeerShm("x", 2)
    expect(await take(c.values(peer))).toEqual([3, 3, 3, 3])
    own.release()
    // Once rank 1's release arrives, rank 1 fails only because rank 0 still exports rank 2's copy.
    const stillPeer = await eventually(() => failuresOnAll((w) => w.free(["x"])), (r) => !(r[1] instanceof SymmetricFreeError))
    expect(stillPeer[0]).toBeInstanceOf(SymmetricFreeError)
    expect(stillPeer[0]).toMatchObject({ reason: "exported", message: expect.stringContaining("rank 2's copy") })
    peer.release()
    expect(await eventually(() => settledOnAll((w) => w.free(["x", "y"])), noneFailed)).toEqual([[false, false], [false, false], [false, false]])
  })
})

describe.skipIf(fs.existsSync("/dev/nvidia0"))("GPU backends, as far as a machine without a GPU goes", () => {
  it("nvshmem: the ranks bootstrap over the group, NVSHMEM's init fails on every rank, and nothing is allocated (no process exits)", async () => {
    const first = await failuresOnAll((w) => w.alloc("g", [16], "float32", { group: "sym", backend: "nvshmem" }))
    for (const e of first) {
      expect(e).toBeInstanceOf(SymmetricBackendError)
      expect(e).toMatchObject({ reason: "not-initialized", message: expect.stringContaining("nvshmemx_hostlib_init_attr returned") })
      expect(e.message).toContain("rank 2")
      // No driver here to make cuda:0 current with (the default device); NVSHMEM's init was still tried.
      expect(e.message).toContain("(no device made current: dlopen(libcuda.so.1) failed: libcuda.so.1")
    }
    // Remembered: refused at once, on every rank, without another bootstrap.
    const again = await failuresOnAll((w) => w.alloc("g", [16], "float32", { group: "sym", backend: "nvshmem" }))
    for (const e of again) expect(e).toMatchObject({ _tag: "SymmetricBackendError", reason: "not-initialized" })
    expect(await onAll((w) => w.pid())).toHaveLength(3)
  })

  it("nvshmem makes the device asked for current on every rank before its init (a TEST DOUBLE of libcuda.so.1); a device the driver lacks fails every rank with DeviceError and leaves the init for later", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-fake-cuda-"))
    const log = join(dir, "calls.log")
    const env = { NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME: "lo", TENSORLANE_CUDA_DRIVER_LIBRARY: buildFakeCudaDriver(dir), FAKE_CUDA_LOG: log, FAKE_CUDA_DEVICES: "2" }
    // A cluster of its own: NVSHMEM's failed init stays with these processes.
    await using gpuCluster = await start({ transports: [SYMMETRIC] })
    const ranks = await gpuCluster.spawn(SymWorker, { count: 2, env })
    await gpuCluster.createCollectiveGroup(ranks, { backend: "shm", name: "nv" })
    const failures = (...devices: Array<Device>) =>
      Promise.all(
        ranks.map((w, rank) =>
          gpuCluster.get(w.alloc("d", [4], "float32", { group: "nv", backend: "nvshmem", device: devices[rank] ?? devices[0] })).then(
            () => undefined,
            (e: Error) => e,
          ),
        ),
      )
    // A device one rank refuses by itself is stated in the agreement: the other rank fails too instead of waiting.
    const [cpu, peer] = await failures("cpu", "cuda:1")
    expect(cpu).toBeInstanceOf(DeviceError)
    expect(peer).toMatchObject({ _tag: "SymmetricMismatchError", what: "peer", message: expect.stringContaining("GPU memory") })
    for (const e of await failures("cuda:5")) {
      expect(e).toBeInstanceOf(DeviceError)
      expect(e?.message).toContain("rank 0: cuda:5: the driver sees 2 device(s), so there is no cuda:5; rank 1: cuda:5: the driver sees 2 device(s)")
    }
    // Not remembered: with a device the driver has, the ranks bootstrap, and NVSHMEM's own init fails (no GPU).
    for (const e of await failures("cuda:1")) expect(e).toMatchObject({ _tag: "SymmetricBackendError", reason: "not-initialized" })
    for (const pid of await Promise.all(ranks.map((w) => gpuCluster.get(w.pid())))) {
      expect(fakeCudaCalls(log).filter(([p]) => p === pid).map(([, call]) => call)).toEqual([
        "cuInit 0",
        "cuDeviceGetCount 2",
        "cuInit 0",
        "cuDeviceGetCount 2",
        "cuDeviceGet 1",
        "cuDevicePrimaryCtxRetain 1",
        "cuCtxSetCurrent 2",
        "cuCtxGetDevice 1",
      ])
    }
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("nccl-window with the real NCCL wheel: ncclMemAlloc fails with NoCudaDeviceError on every rank, before any collective NCCL call", async () => {
    const failed = await failuresOnAll((w) => w.alloc("w", [16], "float32", { group: "sym", backend: "nccl-window", timeoutMs: 20_000 }))
    for (const e of failed) {
      expect(e).toBeInstanceOf(NoCudaDeviceError)
      expect(e).toMatchObject({ device: "cuda:0", driverVersion: 0, deviceCount: 0, message: expect.stringContaining("ncclMemAlloc") })
    }
    // Nothing was created: the heap's own communicator comes after every rank holds its memory.
    expect(await onAll((w) => w.communicators())).toEqual([[], [], []])
    // The failed call counted alike on every rank: the next shm allocation lines up.
    expect(await onAll((w) => w.alloc("after", [2], "float32", { group: "sym" }))).toHaveLength(3)
    await onAll((w) => w.free(["after"]))
  })

  it("unknown backends are refused, listing the known ones", async () => {
    const u = await failureOf(a.alloc("w", [16], "float32", { group: "sym", backend: "mpi" as never }))
    expect(u).toBeInstanceOf(SymmetricBackendError)
    expect(u).toMatchObject({ reason: "unsupported", message: expect.stringContaining("known: shm, nvshmem, nccl-window") })
  })
})

describe("the shm transport", () => {
  it("moves an ordinary tensor (staged on the producer's heap) to an actor and to the driver", async () => {
    const ref = a.make(1 << 20, 3)
    expect(await take(b.numel(ref))).toBe(1 << 18)
    expect(await take(c.sum(ref))).toBe(3 * (1 << 18))
    expect(((await cluster.get(ref)) as Tensor).sum()).toBe(3 * (1 << 18))
    ref.release()
  })

  it("moves a strided view, and a driver put", async () => {
    const ref = a.strided()
    expect(await take(b.values(ref))).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    ref.release()
    const put = await cluster.put(Tensor.arange(100, { dtype: "float64" }), { tensorTransport: "shm" })
    expect(await take(c.sum(put))).toBe(4950)
    put.release()
  })
})

describe("a producer that shrinks its shm segment", () => {
  /** The producer's staging segment (unlinked, open in its process), as /proc/<pid>/fd/<fd>. */
  const stagingOf = (pid: number): string => {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      const link = `/proc/${pid}/fd/${fd}`
      try {
        if (fs.readlinkSync(link).includes("tensorlane-sym-staging")) return link
      } catch {
        // Closed meanwhile.
      }
    }
    throw new Error(`no staging segment open in process ${pid}`)
  }

  it("fails a consumer's read of it with ProtocolError instead of killing the consumer with SIGBUS; the consumer reads on", async () => {
    const first = a.make(4 << 20, 1)
    // b maps a's staging segment, and keeps it mapped for the next object.
    expect(await take(b.numel(first))).toBe(1 << 20)
    const second = a.make(4 << 20, 2)
    await take(a.numel(second))
    const segment = stagingOf((await take(a.pid())) as number)
    const size = fs.statSync(segment).size
    fs.truncateSync(segment, 4096)
    try {
      const e = await failureOf(b.sum(second))
      expect(e).toMatchObject({ _tag: "ProtocolError", message: expect.stringContaining("segment shrank under a read") })
    } finally {
      fs.truncateSync(segment, size)
      first.release()
      second.release()
    }
    // Its size back, the segment serves the next object, and b lives on.
    const third = a.make(1 << 20, 3)
    expect(await take(b.sum(third))).toBe(3 * (1 << 18))
    third.release()
  })
})

/** The next allocation of two ranks' `group` lines up, at the same place on both: rank 1 reads what rank 0 wrote there. */
const expectLinedUp = async (ranks: ReadonlyArray<ActorHandle<typeof SymWorker>>, group: string): Promise<void> => {
  const small = await Promise.all(ranks.map((w) => take(w.alloc("small", [1024], "float32", { group }))))
  for (const m of small) expect(m.nbytes).toBe(4096)
  await take(ranks[0]!.fill("small", 2))
  expect((await take(ranks[1]!.readPeer("small", 0))).values).toEqual(new Array(1024).fill(2))
  expect(await Promise.all(ranks.map((w) => take(w.free(["small"]))))).toEqual([[false], [false]])
}

describe("a full /dev/shm", () => {
  it("a block /dev/shm cannot back fails with OutOfMemoryError on every rank (posix_fallocate, ENOSPC) instead of a SIGBUS at first touch; the heap stays usable", async () => {
    const { blocks, bsize } = fs.statfsSync("/dev/shm")
    const size = blocks * bsize
    // A heap larger than /dev/shm is only address space (the segment is sparse); a block larger than
    // /dev/shm cannot be backed, and tmpfs says so before taking any page.
    const ranks = await cluster.spawn(SymWorker, { count: 2, env: { TENSORLANE_SHM_HEAP_BYTES: String(size + 2 ** 26) } })
    const full = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "full" })
    try {
      const huge = await Promise.all(ranks.map((w) => failureOf(w.alloc("huge", [Math.ceil((size + 2 ** 20) / 4)], "float32", { group: "full" }))))
      for (const e of huge) {
        expect(e).toBeInstanceOf(OutOfMemoryError)
        expect(e.message).toContain("/dev/shm is full (rank 0: ")
      }
      // Every rank gave its block back.
      await expectLinedUp(ranks, "full")
    } finally {
      await full.destroy()
    }
  })
})

describe("a reservation that fails otherwise", () => {
  it("a rank whose posix_fallocate fails past ENOSPC raises that, the others SymmetricMismatchError naming it; the heap stays usable", async () => {
    // TEST DOUBLE: rank 1's posix_fallocate fails with EIO past 1 MiB (packages/symmetric-mem/test/doubles).
    const doubles = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-failing-fallocate-"))
    const ranks: Array<ActorHandle<typeof SymWorker>> = []
    let group: CollectiveGroup | undefined
    try {
      const double = join(doubles, "failingFallocate.so")
      execFileSync("cc", ["-shared", "-fPIC", "-o", double, new URL("../packages/symmetric-mem/test/doubles/failingFallocate.c", import.meta.url).pathname, "-ldl"])
      ranks.push(...(await cluster.spawn(SymWorker)))
      ranks.push(...(await cluster.spawn(SymWorker, { env: { LD_PRELOAD: double, TENSORLANE_TEST_FAIL_FALLOCATE_ABOVE: String(2 ** 20) } })))
      group = await cluster.createCollectiveGroup(ranks, { backend: "shm", name: "failing" })
      const failed = await Promise.all(ranks.map((w) => failureOf(w.alloc("big", [2 ** 20], "float32", { group: "failing" }))))
      expect(failed[0]).toMatchObject({ _tag: "SymmetricMismatchError", what: "peer", message: expect.stringContaining("rank 1: ") })
      expect(failed[0].message).toMatch(/Input\/output error/)
      expect(failed[1]).not.toBeInstanceOf(SymmetricMismatchError)
      expect(failed[1].message).toMatch(/posix_fallocate of 4194304 bytes.*Input\/output error/)
      // Both gave the block back.
      await expectLinedUp(ranks, "failing")
    } finally {
      await group?.destroy()
      for (const r of ranks) await cluster.kill(r)
      fs.rmSync(doubles, { recursive: true, force: true })
    }
  })
})

describe("memory of destroyed groups", () => {
  /** Whether process `pid` maps a segment of shm group `name` (its name stays in /proc/<pid>/maps, as deleted). */
  const maps = (pid: number, name: string): boolean => fs.readFileSync(`/proc/${pid}/maps`, "utf8").includes(`/tensorlane-sym-${name}-`)

  it("is unmapped by a member once its tensors are gone, and by a consumer that read it over shm once the producer is gone, without another call", async () => {
    const [x, y, z] = await cluster.spawn(SymWorker, { count: 3 })
    const [px, py, pz] = await Promise.all([x, y, z].map((w) => take(w.pid())))
    const lingering = await cluster.createCollectiveGroup([x, y], { backend: "shm", name: "lingering" })
    await Promise.all([x, y].map((w) => take(w.alloc("t", [256], "float32", { group: "lingering" }))))
    await take(x.fill("t", 5))
    const ref = x.giveShm("t")
    expect(await take(z.sum(ref))).toBe(5 * 256)
    expect([px, py, pz].map((pid) => maps(pid, "lingering"))).toEqual([true, true, true])
    ref.release()
    expect(await eventually(() => Promise.all([x, y].map((w) => settle(w.free(["t"])))), noneFailed)).toEqual([[false], [false]])
    await Promise.all([x, y].map((w) => take(w.forget("t"))))
    await lingering.destroy()
    // y made no call since: its main thread forgets the destroyed group's heap by itself.
    const member = async () => {
      await take(y.gc())
      return maps(py, "lingering")
    }
    expect(await eventually(member, (mapped) => !mapped, 10_000)).toBe(false)
    // The consumer keeps its mapping while the producer holds the segment open, and drops it once the producer is gone.
    process.kill(px, "SIGKILL")
    expect(await eventually(() => maps(pz, "lingering"), (mapped) => !mapped, 10_000)).toBe(false)
  })
})

describe("crashes leave nothing behind", () => {
  it("killed ranks (the heap's creator too) leave nothing in /dev/shm, and their peers' next collective call fails instead of hanging", async () => {
    const [x, y, z] = await cluster.spawn(SymWorker, { count: 3 })
    const doomed = await cluster.createCollectiveGroup([x, y, z], { backend: "shm", name: "doomed" })
    const made = await Promise.all([x, y, z].map((w) => take(w.alloc("k", [1024], "float32", { group: "doomed" }))))
    for (const m of made) expect(m.nbytes).toBe(4096)
    await take(x.fill("k", 1))
    process.kill(await take(z.pid()), "SIGKILL")
    expect(shmEntries()).toEqual([])
    // The survivors still share their heap: rank 1 reads rank 0's copy.
    expect((await take(y.readPeer("k", 0))).values).toEqual(new Array(1024).fill(1))
    const after = await Promise.all([x, y].map((w) => failureOf(w.alloc("k2", [16], "float32", { group: "doomed", timeoutMs: 10_000 }))))
    for (const e of after) expect([ActorDiedError, TimeoutError, MissingGroupError].some((c) => e instanceof c)).toBe(true)
    // Rank 0 created the segment: killing it leaves nothing either.
    process.kill(await take(x.pid()), "SIGKILL")
    expect(shmEntries()).toEqual([])
    await doomed.destroy().catch(() => undefined)
    await sleep(100)
    expect(shmEntries()).toEqual([])
  })

  it("a group destroyed and created again under the same name gets a fresh heap", async () => {
    await group.destroy()
    const gone = await failureOf(a.alloc("gone", [2], "float32", { group: "sym" }))
    expect(gone instanceof MissingGroupError || gone instanceof SymmetricBackendError).toBe(true)
    group = await cluster.createCollectiveGroup([a, b, c], { backend: "shm", name: "sym" })
    const made = await onAll((w) => w.alloc("fresh", [2], "float32", { group: "sym" }))
    for (const m of made) expect(m.shape).toEqual([2])
    await onAll((w) => w.free(["fresh"]))
    expect(await eventually(() => shmEntries(), (e) => e.length === 0)).toEqual([])
  })
})
