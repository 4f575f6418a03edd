/**
 * The worked example of docs/custom-transport.md, examples/transport-tcp, loaded by package name like
 * any third-party transport, in both its forms: written with Promises (`tcp`) and in Effect
 * (`tcp-effect`, the package's `./effect`). Each moves tensors actor to actor, actor to driver (into
 * a target), put from the driver, nested values of every dtype, progresses while the producer is
 * busy, and leaves nothing once released.
 */
import { type ActorHandle, type Cluster, type ObjectRef, Tensor, start } from "@tensorlane/core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { Worker } from "./fixtures/actors.ts"
import { digest, nested } from "./fixtures/samples.ts"
import { expectClean, startedMarker, take as takeFrom } from "./helpers.ts"

const TCP = "@tensorlane-examples/transport-tcp"
const TCP_EFFECT = "@tensorlane-examples/transport-tcp/effect"

let cluster: Cluster
let a: ActorHandle<typeof Worker>
let b: ActorHandle<typeof Worker>

beforeAll(async () => {
  cluster = await start({ transports: [TCP, TCP_EFFECT] })
  ;[a, b] = await cluster.spawn(Worker, { count: 2 })
}, 60_000)
afterAll(() => cluster?.shutdown())
afterEach(() => expectClean(cluster))

const take = <T>(ref: ObjectRef<T>): Promise<T> => takeFrom(cluster)(ref)

describe.each(["tcp", "tcp-effect"])("examples/transport-tcp's %s, loaded by name", (transport) => {
  it("moves a tensor actor to actor and to the driver, and serves it while the producer holds it", async () => {
    const ref = a.make.options({ tensorTransport: transport })(4 << 20)
    expect(await take(b.sum(ref))).toBe(1 << 20)
    expect((await cluster.inspect()).processes[a.actorId].registrations).toEqual([ref.id])
    const target = Tensor.zeros([1 << 20], { dtype: "float32" })
    const got = await cluster.get(ref, { target: [target] })
    expect(got).toBe(target)
    expect(target.sum()).toBe(1 << 20)
    ref.release()
  })

  it("carries nested values of every dtype, both ways", async () => {
    const expected = nested(64, 3)
    const ref = a.nested.options({ tensorTransport: transport })(64, 3)
    expect(await take(b.digest(ref))).toEqual(digest(expected))
    expect(digest(await cluster.get(ref))).toEqual(digest(expected))
    ref.release()
    const put = await cluster.put(expected, { tensorTransport: transport })
    expect(await take(b.digest(put))).toEqual(digest(expected))
    put.release()
  })

  it("serves from the producer's transfer agent while its JS thread is busy", async () => {
    const ref = a.make.options({ tensorTransport: transport })(1 << 20)
    await take(b.numel(ref)) // the object exists before the producer gets busy
    const marker = startedMarker()
    try {
      const busy = a.busy(2_000, marker.file)
      await marker.started()
      const numel = b.numel(ref)
      expect(await cluster.get(numel)).toBe(1 << 18)
      const arrived = Date.now()
      // The producer's main thread was spinning while the consumer got the tensor.
      const { start, end } = await cluster.get(busy)
      expect(start).toBeLessThan(arrived)
      expect(arrived).toBeLessThan(end)
      for (const r of [busy, numel]) r.release()
    } finally {
      marker.done()
    }
    ref.release()
  })
})
