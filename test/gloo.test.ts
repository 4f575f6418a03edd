/**
 * The gloo transport through the real runtime: seed 001's walkthrough (Ray Direct Transport over
 * Gloo), progress while the producer is busy, failures (missing group, group conflict, a tensor on
 * another device, a peer dying mid-transfer), where the device threads run, and collectives inside
 * actors. One cluster for the file.
 */
import { type ActorHandle, type Cluster, type CollectiveGroup, type GetOptions, type ObjectRef, start } from "@tensorlane/core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { GlooWorker } from "./fixtures/glooActors.mjs"
import { bytesMoved, eventually, expectClean, rejection, sleep, tagOf, take as takeFrom } from "./helpers.ts"

const GLOO = "@tensorlane/transport-gloo"

let cluster: Cluster
let sender: ActorHandle<typeof GlooWorker>
let receiver: ActorHandle<typeof GlooWorker>
let third: ActorHandle<typeof GlooWorker>
let group: CollectiveGroup
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

beforeAll(async () => {
  cluster = await start({ transports: [GLOO] })
  ;[sender, receiver, third] = await cluster.spawn(GlooWorker, { count: 3 })
  group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })
}, 60_000)

afterAll(() => cluster?.shutdown())
afterEach(async () => {
  await expectClean(cluster)
})

describe("seed 001: Ray Direct Transport over Gloo", () => {
  it("a random tensor moves sender -> receiver and is summed there", async () => {
    const tensor = sender.randomTensor()
    const [mine, theirs] = await Promise.all([take(sender.sum(tensor)), take(receiver.sum(tensor))])
    expect(theirs).toBe(mine)
    expect(Number.isFinite(theirs)).toBe(true)
    tensor.release()
  })

  it("a dict of tensors moves whole, strided views included", async () => {
    const dict = sender.tensorDict()
    expect(await take(receiver.sumDict(dict))).toBe(await take(sender.sumDict(dict)))
    expect(await take(receiver.strided(dict))).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    dict.release()
  })

  it("a ref passed back to its producer is the very tensor; the other actor gets a copy", async () => {
    const tensor = sender.keep()
    const [sum1, sum2] = await Promise.all([take(sender.sum(tensor)), take(receiver.sum(tensor))])
    expect(sum2).toBe(sum1)
    expect(await take(sender.isKept(tensor))).toBe(true)
    expect(await take(receiver.isKept(tensor))).toBe(false)
    tensor.release()
  })

  it("get without useObjectStore says how to fix it; with it, the value comes through the control plane", async () => {
    const tensor = sender.randomTensor()
    const error = await rejection(() => cluster.get(tensor))
    expect(tagOf(error)).toBeDefined()
    expect((error as Error).message).toMatch(/useObjectStore/)
    const value = await cluster.get(tensor, { useObjectStore: true })
    expect(value.shape).toEqual([1000, 1000])
    expect(value.sum()).toBe(await take(sender.sum(tensor)))
    tensor.release()
  })

  it("objects are mutable: an in-place update made before the transfer is what the receiver gets", async () => {
    const tensor = sender.keep()
    const updated = await take(sender.incrementAndSumStored(false))
    // The receiver adds one again to what it received: the already-updated tensor.
    const received = await take(receiver.incrementAndSum(tensor))
    expect(received).not.toBeCloseTo(updated, 0)
    expect(received).toBeCloseTo(updated + 1_000_000, -2)
    tensor.release()
  })

  it("waitTensorFreed fixes it: the update waits until every ref and consumer is done", async () => {
    const tensor = sender.keep()
    const original = await take(sender.keptSum())
    const tensor1 = sender.incrementAndSumStored(true)
    const tensor2 = receiver.incrementAndSum(tensor)
    tensor.release()
    const [sum1, sum2] = await Promise.all([take(tensor1), take(tensor2)])
    expect(sum1).toBeCloseTo(sum2, -2)
    expect(sum2).toBeCloseTo(original + 1_000_000, -2)
  })

  it("a group can be destroyed and created again on the same actors", async () => {
    await group.destroy()
    const orphan = sender.randomTensor()
    const missing = await rejection(() => take(receiver.sum(orphan)))
    expect(tagOf(missing)).toBe("MissingGroupError")
    orphan.release()
    group = await cluster.createCollectiveGroup([sender, receiver], { backend: "gloo" })
    const tensor = sender.randomTensor()
    expect(await take(receiver.sum(tensor))).toBe(await take(sender.sum(tensor)))
    tensor.release()
  })
})

describe("transfers in flight together", () => {
  it("on every pair of a group at once, and twice on one pair, each consumer gets its own producer's object", async () => {
    const [a, b, c] = await cluster.spawn(GlooWorker, { count: 3 })
    const ring = await cluster.createCollectiveGroup([a, b, c], { backend: "gloo" })
    const made = [a.randomTensor(), b.randomTensor(), c.randomTensor(), a.randomTensor()]
    const expected = await Promise.all(made.map((ref, i) => take([a, b, c, a][i].sum(ref))))
    // Submitted together: a -> b, b -> c, c -> a, and a second a -> b.
    const received = await Promise.all([b.sum(made[0]), c.sum(made[1]), a.sum(made[2]), b.sum(made[3])].map((ref) => take(ref)))
    expect(received).toEqual(expected)
    for (const ref of made) ref.release()
    await ring.destroy()
  })
})

describe("progress and failures", () => {
  it("a 64 MiB transfer completes while the producer's JS thread is busy in a long method", async () => {
    const n = 64 << 20
    const ref = sender.make(n)
    expect(await take(sender.numel(ref))).toBe(n / 4)
    const busy = sender.busy(3_000)
    await sleep(300)
    const received = receiver.numel(ref)
    expect(await take(received)).toBe(n / 4)
    const doneAt = Date.now()
    const { end } = await take(busy)
    expect(doneAt).toBeLessThan(end)
    ref.release()
  })

  // The producer's agent hears of the send when the consumer's call is submitted and starts it as soon
  // as the object is registered, without waiting for the driver to dispatch the consumer's call.
  it("a consumer's call submitted while the producer's method runs: the producer's agent waits with the send, then it moves", async () => {
    const n = 4 << 20
    const ref = sender.makeLater(n, 600)
    const received = receiver.numel(ref)
    const waiting = await eventually(
      () => cluster.inspect(),
      (i) => (i.processes[sender.actorId]?.pendingTransfers.length ?? 0) > 0,
    )
    expect(waiting.processes[sender.actorId]?.pendingTransfers).toEqual([expect.stringMatching(new RegExp(`^gloo ${ref.id} .* -> ${receiver.actorId}$`))])
    expect(await take(received)).toBe(n / 4)
    ref.release()
  })

  it("a producer's method failing after its consumer's call was submitted fails that call with its error and leaves no send waiting", async () => {
    const ref = sender.failLater(300)
    const error = await rejection(() => take(receiver.numel(ref)))
    expect((error as Error).message).toMatch(/failLater failed on purpose/)
    ref.release()
    // afterEach: the producer's agent lists no transfer any more (the driver cancelled the send).
  })

  it("a producer's method returning no tensor after its consumer's call was submitted leaves no send waiting", async () => {
    const ref = sender.plainLater({ answer: 42 }, 300)
    expect(await take(receiver.echo(ref))).toEqual({ answer: 42 })
    ref.release()
    // afterEach: the producer's agent lists no transfer (nothing was registered, so nothing is sent).
  })

  it("a call never sent because another argument failed still takes in an object sent to it early, as a copy", async () => {
    const early = sender.makeLater(1 << 20, 300)
    const failing = third.failLater.options({ tensorTransport: "object-store" })(100)
    const call = receiver.echo([early, failing])
    expect(((await rejection(() => take(call))) as Error).message).toMatch(/failLater failed on purpose/)
    // Its send was posted once the object existed, and a posted gloo send cannot be taken back: the
    // receiver takes the object in (and keeps the copy for its later calls) instead of leaving it posted.
    // The sender's job ends a moment after the receiver has the bytes.
    const inspection = await eventually(
      () => cluster.inspect(),
      (i) => i.processes[receiver.actorId]?.received.includes(early.id) === true && i.processes[sender.actorId]?.pendingTransfers.length === 0,
    )
    expect(inspection.processes[receiver.actorId]?.received).toContain(early.id)
    expect(inspection.processes[sender.actorId]?.pendingTransfers).toEqual([])
    const before = await bytesMoved("gloo")
    expect(await take(receiver.numel(early))).toBe((1 << 20) / 4)
    expect(await bytesMoved("gloo")).toBe(before)
    early.release()
    failing.release()
  })

  // 16 KiB travels inline, 256 KiB over Gloo: the size decides nothing.
  it.each([16 << 10, 256 << 10])("a call whose first argument's group is gone (%i bytes) fails with MissingGroupError and still takes in the others: no producer is left sending to it", async (bytes) => {
    const pair = await cluster.createCollectiveGroup([third, receiver], { backend: "gloo" })
    const lost = third.makeLater(bytes, 300)
    const kept = sender.make(1 << 20)
    const call = receiver.echo([lost, kept])
    // The call is sent once `lost` exists, with a route through a group that is gone by then.
    await pair.destroy()
    expect(tagOf(await rejection(() => take(call)))).toBe("MissingGroupError")
    lost.release()
    kept.release()
    // afterEach: the sender lists no send (its transfer to the receiver ended).
  })

  // Its dispatch may come long after the object is made: the send's time limit must not run from there.
  it("a call queued behind a call still waiting for its arguments has its send started at its own dispatch", async () => {
    const slow = third.makeLater.options({ tensorTransport: "object-store" })(1024, 800)
    const first = receiver.numel(slow)
    const ref = sender.makeLater(4 << 20, 100)
    const second = receiver.numel(ref)
    await sleep(400)
    // The object exists by now and the second call is not sent yet: no send is waiting for it.
    expect((await cluster.inspect()).processes[sender.actorId]?.pendingTransfers).toEqual([])
    expect(await take(first)).toBe(256)
    expect(await take(second)).toBe((4 << 20) / 4)
    slow.release()
    ref.release()
  })

  it("a consumer dying while its producer's method runs leaves the producer's agent no send waiting", async () => {
    const [victim] = await cluster.spawn(GlooWorker, { count: 1 })
    const pair = await cluster.createCollectiveGroup([sender, victim], { backend: "gloo" })
    const pid = await take(victim.pid())
    const ref = sender.makeLater(4 << 20, 600)
    const call = rejection(take(victim.numel(ref)))
    await eventually(
      () => cluster.inspect(),
      (i) => (i.processes[sender.actorId]?.pendingTransfers.length ?? 0) > 0,
    )
    process.kill(pid, "SIGKILL")
    expect(tagOf(await call)).toBe("ActorDiedError")
    ref.release()
    await pair.destroy()
  })

  it("a transfer between actors that share no gloo group fails at submission naming createCollectiveGroup", async () => {
    const ref = sender.randomTensor()
    const error = await rejection(() => take(third.sum(ref)))
    expect(tagOf(error)).toBe("MissingGroupError")
    expect((error as Error).message).toMatch(/createCollectiveGroup/)
    ref.release()
  })

  it("a second gloo group on the same pair of actors is a GroupConflictError", async () => {
    const error = await rejection(() => cluster.createCollectiveGroup([receiver, sender], { backend: "gloo" }))
    expect(tagOf(error)).toBe("GroupConflictError")
  })

  it("a gloo method returning a tensor on another device fails with a DeviceError naming it and the transport", async () => {
    const ref = sender.cudaTensor()
    const error = await rejection(() => take(receiver.numel(ref)))
    expect(tagOf(error)).toBe("DeviceError")
    expect((error as Error).message).toMatch(/cuda:0/)
    expect((error as Error).message).toMatch(/gloo/)
    ref.release()
  })

  it("a producer dying mid-transfer fails the call with a typed error; the survivors stay usable", async () => {
    const [victim, survivor] = await cluster.spawn(GlooWorker, { count: 2 })
    const doomed = await cluster.createCollectiveGroup([victim, survivor], { backend: "gloo" })
    const ref = victim.make(16 << 20)
    const pid = await take(victim.pid())
    // Frozen, the producer cannot send: the consumer's receive is posted and waits for it.
    process.kill(pid, "SIGSTOP")
    const call = rejection(take(survivor.numel(ref)))
    // The frozen producer cannot answer inspect: a short timeout lists it as unresponsive instead
    // (and any other actor slow to answer on a loaded machine, so ask until only it is).
    const pending = await eventually(
      () => cluster.inspect({ timeoutMs: 200 }),
      (i) => (i.processes[survivor.actorId]?.pendingTransfers.length ?? 0) > 0 && i.unresponsive.length === 1,
    )
    expect(pending.unresponsive).toEqual([victim.actorId])
    process.kill(pid, "SIGKILL")
    expect(["TransferError", "ActorDiedError"]).toContain(tagOf(await call))
    ref.release()
    await doomed.destroy()
    // The survivor works on, over gloo too, with an actor it had no group with.
    const fresh = await cluster.createCollectiveGroup([survivor, third], { backend: "gloo" })
    const tensor = third.randomTensor()
    expect(await take(survivor.sum(tensor))).toBe(await take(third.sum(tensor)))
    tensor.release()
    await fresh.destroy()
    await expectClean(cluster)
  })
})

describe("device placement", () => {
  it("the members of a group leave their gloo device threads free to run on every CPU", async () => {
    const [first, second] = await Promise.all([take(sender.placement()), take(receiver.placement())])
    expect([first.narrower, second.narrower]).toEqual([[], []])
  })
})

describe("collectives inside actors via group(name)", () => {
  it("allreduce sums and maxes in place on every member", async () => {
    const pair = await cluster.createCollectiveGroup([third, sender], { backend: "gloo", name: "collectives" })
    const [x, y] = await Promise.all([
      take(third.allreduce(pair.name, [1, 2, 3], "sum")),
      take(sender.allreduce(pair.name, [10, 20, 30], "sum")),
    ])
    expect(x).toEqual([11, 22, 33])
    expect(y).toEqual([11, 22, 33])
    const [p, q] = await Promise.all([take(third.allreduce(pair.name, [1, 50], "max")), take(sender.allreduce(pair.name, [7, 5], "max"))])
    expect(p).toEqual([7, 50])
    expect(q).toEqual([7, 50])
    await pair.destroy()
  })

  it("broadcast hands the root's tensor to every member", async () => {
    const [r0, r1] = await Promise.all([take(sender.broadcast(group.name, [1, 2, 3], 1)), take(receiver.broadcast(group.name, [7, 8, 9], 1))])
    expect(r0).toEqual([7, 8, 9])
    expect(r1).toEqual([7, 8, 9])
  })
})

describe("cluster.broadcast over gloo", () => {
  it("one collective broadcast places the producer's object in every other member; their calls move no bytes", async () => {
    const [a, b, c] = await cluster.spawn(GlooWorker, { count: 3 })
    const everyone = await cluster.createCollectiveGroup([a, b, c], { backend: "gloo" })
    const ref = a.randomTensor()
    const expected = await take(a.sum(ref))
    await cluster.broadcast(ref, [b, c])
    const { processes } = await cluster.inspect()
    expect([b, c].map((r) => processes[r.actorId].received)).toEqual([[ref.id], [ref.id]])
    const moved = await bytesMoved("gloo")
    expect([await take(b.sum(ref)), await take(c.sum(ref))]).toEqual([expected, expected])
    expect(await bytesMoved("gloo")).toBe(moved)
    // No send was started for those calls either.
    expect((await cluster.inspect()).processes[a.actorId].pendingTransfers).toEqual([])
    ref.release()
    await everyone.destroy()
  })

  it("goes as one collective to the rest of the group, and as one send each to part of it", async () => {
    const [a, b, c] = await cluster.spawn(GlooWorker, { count: 3 })
    const everyone = await cluster.createCollectiveGroup([a, b, c], { backend: "gloo" })
    const pids = { b: await take(b.pid()), c: await take(c.pid()) }
    /** What the producer has in flight while `frozen` cannot take its part. */
    const inFlightWhile = async (frozen: number, broadcast: () => Promise<void>) => {
      process.kill(frozen, "SIGSTOP")
      const done = broadcast()
      try {
        const during = await eventually(
          () => cluster.inspect({ timeoutMs: 200 }),
          (i) => (i.processes[a.actorId]?.pendingTransfers.length ?? 0) > 0,
        )
        return during.processes[a.actorId]?.pendingTransfers
      } finally {
        process.kill(frozen, "SIGCONT")
        await done
      }
    }
    const whole = a.make(1 << 20)
    expect(await inFlightWhile(pids.c, () => cluster.broadcast(whole, [b, c]))).toEqual([`gloo broadcast ${whole.id} from ${a.actorId}`])
    const part = a.make(1 << 20)
    expect(await inFlightWhile(pids.b, () => cluster.broadcast(part, [b]))).toEqual([`gloo ${part.id} ${a.actorId} -> ${b.actorId}`])
    const { processes } = await cluster.inspect()
    expect([b, c].map((r) => processes[r.actorId].received)).toEqual([[whole.id, part.id], [whole.id]])
    whole.release()
    part.release()
    await everyone.destroy()
  })
})

describe("transfer timeouts", () => {
  it("a receive that outlives transferTimeoutMs fails with TimeoutError; the group is re-created and works", async () => {
    await using short = await start({ transports: [GLOO], transferTimeoutMs: 1_000 })
    const [producer, consumer] = await short.spawn(GlooWorker, { count: 2 })
    const first = await short.createCollectiveGroup([producer, consumer], { backend: "gloo" })
    const ref = producer.make(1 << 20)
    const pidRef = producer.pid()
    const pid = await short.get(pidRef)
    // A frozen producer never sends: the consumer's receive runs into the transfer timeout.
    process.kill(pid, "SIGSTOP")
    const counted = consumer.numel(ref)
    const error = await rejection(short.get(counted))
    process.kill(pid, "SIGCONT")
    expect(tagOf(error)).toBe("TimeoutError")
    ref.release()
    await first.destroy()
    const second = await short.createCollectiveGroup([producer, consumer], { backend: "gloo" })
    const again = producer.make(1 << 20)
    const countedAgain = consumer.numel(again)
    expect(await short.get(countedAgain)).toBe(1 << 18)
    for (const r of [pidRef, counted, again, countedAgain]) r.release()
    await second.destroy()
    // The timed-out receive, its producer's send and what they kept are all gone.
    await expectClean(short)
  })
})
