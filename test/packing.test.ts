/**
 * A value's small tensors in default host memory travel packed in one block (packages/core/src/internal/packing.ts):
 * byte for byte over every host transport, actor to actor, to the driver and into targets; received as
 * aligned views of one block; copied as the method returns (docs/memory-registration.md).
 */
import { type ActorHandle, type Cluster, type GetOptions, type ObjectRef, Tensor, start } from "@tensorlane/core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { PackingWorker, filled, mixed } from "./fixtures/packingActors.ts"
import { digest, sample, tensorsOf } from "./fixtures/samples.ts"
import { expectClean, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let a: ActorHandle<typeof PackingWorker>
let b: ActorHandle<typeof PackingWorker>
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

beforeAll(async () => {
  cluster = await start({ transports: ["@tensorlane/transport-gloo", "@tensorlane/transport-nixl", "@tensorlane/symmetric-mem"] })
  ;[a, b] = await cluster.spawn(PackingWorker, { count: 2 })
  await cluster.createCollectiveGroup([a, b], { backend: "gloo" })
}, 60_000)

afterAll(() => cluster?.shutdown())
afterEach(() => expectClean(cluster))

describe("small tensors of one value travel packed", () => {
  it.each(["object-store", "gloo", "nixl", "shm"])("byte for byte, actor to actor, to the driver and into targets (%s)", async (transport) => {
    const seed = transport.length
    const expected = mixed(seed)
    const ref = a.mixed.options({ tensorTransport: transport })(seed, false)
    expect(await take(b.digest(ref))).toEqual(digest(expected))
    const options = transport === "gloo" ? { useObjectStore: true } : {}
    const got = await cluster.get(ref, options)
    expect(digest(got)).toEqual(digest(expected))
    // Views of one block, each at a multiple of 64 bytes; the large tensor and its rows have storages of their own.
    const small = tensorsOf(got).filter(([path]) => path !== "$.large" && path !== "$.rows")
    expect(small.length).toBe(tensorsOf(expected).length - 2)
    expect(new Set(small.map(([, t]) => t.storage)).size).toBe(1)
    for (const [path, t] of small) expect(t.byteOffset % 64, path).toBe(0)
    expect(new Set([got.large.storage, got.rows.storage, got.scalar.storage]).size).toBe(3)
    expect(got.twice[0]).not.toBe(got.twice[1])
    // Into the caller's tensors, in the value's tensor order.
    const target = tensorsOf(expected).map(([, t]) => Tensor.zeros(t.shape, { dtype: t.dtype }))
    const into = await cluster.get(ref, { ...options, target })
    tensorsOf(into).forEach(([path, t], i) => expect(t === target[i], path).toBe(true))
    expect(digest(into)).toEqual(digest(expected))
    ref.release()
  })

  it("a pool's tensors travel as they are, beside the packed ones", async () => {
    const ref = a.mixed.options({ tensorTransport: "nixl" })(5, true)
    const expected = mixed(5, sample("uint8", 1024, 9))
    expect(await take(b.digest(ref))).toEqual(digest(expected))
    const got = await cluster.get(ref)
    expect(digest(got)).toEqual(digest(expected))
    expect(got.pooled!.storage).not.toBe(got.scalar.storage)
    ref.release()
  })

  it("more than a block holds travel in several blocks", async () => {
    // 70 tensors just under 1 MiB: 67 fill the first block of 64 MiB.
    const ref = a.filled.options({ tensorTransport: "nixl" })(70, 1_000_000)
    const expected = digest(filled(70, 1_000_000))
    expect(await take(b.digest(ref))).toEqual(expected)
    const got = await cluster.get(ref)
    expect(digest(got)).toEqual(expected)
    expect(new Set(got.map((t) => t.storage)).size).toBe(2)
    ref.release()
  })

  it.each(["object-store", "nixl"])("they are copied as the method returns: a later change in place reaches the producer only (%s)", async (transport) => {
    const ref = a.keep.options({ tensorTransport: transport })()
    await take(a.mutateKept(7))
    expect(await take(b.sums(ref))).toEqual([16384, 16384])
    expect(await take(a.isKept(ref))).toBe(true)
    expect(await take(a.sums(ref))).toEqual([7 * 16384, 7 * 16384])
    ref.release()
  })
})
