/**
 * Symmetric memory through the real runtime (seed 002, nvmath-python's allocate_symmetric_memory /
 * free_symmetric_memory), with the shm backend: actor processes of one shm group allocate together,
 * sizes are agreed (and refused without makeSymmetric), peers write into each other's copies, frees
 * are checked for order, views, foreign tensors and double frees, symmetric tensors travel as
 * method results, and nothing is left in /dev/shm, not even after a rank is killed. Failures in the
 * actors reach the driver as their own classes (the packages register them with core).
 */
import * as fs from "node:fs"
import {
  type ActorHandle,
  ActorDiedError,
  type Cluster,
  type CollectiveGroup,
  DTypeError,
  type GetOptions,
  MissingGroupError,
  type ObjectRef,
  ObjectFreedError,
  ShapeError,
  Tensor,
  TimeoutError,
  UnsupportedOperationError,
  start,
} from "@tensorlane/core"
import { SymmetricBackendError, SymmetricFreeError, SymmetricMismatchError } from "@tensorlane/symmetric-mem"
import { NoCudaDeviceError } from "@tensorlane/transport-nccl"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { SymWorker } from "./fixtures/symmetricActors.mjs"
import { eventually, expectClean, sleep, take as takeFrom } from "./helpers.ts"

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
const failureOf = (ref: ObjectRef<unknown>): Promise<Error> =>
  take(ref).then(
    (value) => {
      throw new Error(`expected a failure, got ${JSON.stringify(value)}`)
    },
    (error: Error) => error,
  )

/** onAll for calls that fail on every member: each member's error. */
const failuresOnAll = (call: (w: ActorHandle<typeof SymWorker>, rank: number) => ObjectRef<unknown>): Promise<Array<Error>> =>
  Promise.all([a, b, c].map((w, rank) => failureOf(call(w, rank))))

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

  it("a double free, a view, a peer's copy and a foreign tensor fail clearly; a freed tensor cannot be read", async () => {
    await onAll((w) => w.alloc("d", [2, 2], "float64", { group: "sym" }))
    const view = await failureOf(a.freeView("d"))
    expect(view).toBeInstanceOf(SymmetricFreeError)
    expect(view).toMatchObject({ reason: "view", message: expect.stringContaining("a view of symmetric allocation") })
    expect(await failureOf(a.freePeer("d", 1))).toMatchObject({ _tag: "SymmetricFreeError", reason: "view", message: expect.stringContaining("a peer's copy") })
    expect(await failureOf(a.freeForeign())).toMatchObject({ _tag: "SymmetricFreeError", reason: "foreign" })
    await onAll((w) => w.free(["d"]))
    const twice = await failureOf(a.free(["d"]))
    expect(twice).toBeInstanceOf(SymmetricFreeError)
    expect(twice).toMatchObject({ reason: "double-free" })
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
    await onAll((w) => w.free(["r"]))
  })
})

describe("GPU backends, as far as a machine without a GPU goes", () => {
  it("nvshmem: the ranks bootstrap over the group, NVSHMEM's init fails on every rank, and nothing is allocated (no process exits)", async () => {
    const first = await failuresOnAll((w) => w.alloc("g", [16], "float32", { group: "sym", backend: "nvshmem" }))
    for (const e of first) {
      expect(e).toBeInstanceOf(SymmetricBackendError)
      expect(e).toMatchObject({ reason: "not-initialized", message: expect.stringContaining("nvshmemx_hostlib_init_attr returned") })
      expect(e.message).toContain("rank 2")
    }
    // Remembered: refused at once, on every rank, without another bootstrap.
    const again = await failuresOnAll((w) => w.alloc("g", [16], "float32", { group: "sym", backend: "nvshmem" }))
    for (const e of again) expect(e).toMatchObject({ _tag: "SymmetricBackendError", reason: "not-initialized" })
    expect(await onAll((w) => w.pid())).toHaveLength(3)
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
