/**
 * Collective groups with the two-sided socketpair fixture transport: transfers inside a group,
 * create/destroy/recreate, conflicts, several groups per actor, and application errors that leave
 * the group intact.
 */
import {
  type ActorHandle,
  ApplicationError,
  type Cluster,
  type GetOptions,
  GroupConflictError,
  MissingGroupError,
  type ObjectRef,
  start,
} from "@tensorlane/core"
import * as fs from "node:fs"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { PairWorker } from "./fixtures/actors.ts"
import { digest, nested, tensorsOf } from "./fixtures/samples.ts"
import { SOCKETPAIR, bytesMoved, eventually, expectClean, rejection, sleep, tagOf, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let p0: ActorHandle<typeof PairWorker>
let p1: ActorHandle<typeof PairWorker>
let p2: ActorHandle<typeof PairWorker>
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

const LARGE = 1 << 20
/** A transport whose group creation gathers twice. */
const TWO_ROUNDS = new URL("./fixtures/twoRoundGroups.mjs", import.meta.url).href

/** Sum of a fresh tensor of `value`s made by `from` and summed by `to` over socketpair. */
const moved = async (from: typeof p0, to: typeof p0, value: number): Promise<number> => {
  const made = from.make(LARGE, value)
  try {
    return await take(to.sum(made))
  } finally {
    made.release()
  }
}

beforeAll(async () => {
  cluster = await start({ transports: [SOCKETPAIR, TWO_ROUNDS] })
  ;[p0, p1, p2] = await cluster.spawn(PairWorker, { count: 3 })
}, 60_000)

afterAll(() => cluster?.shutdown())
afterEach(() => expectClean(cluster))

describe("collective groups", () => {
  it("move nested values of every dtype between members, both ways", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "pair" })
    expect(group.members).toEqual([p0.actorId, p1.actorId])
    expect(cluster.listGroups()).toEqual([{ name: "pair", backend: "socketpair", members: [p0.actorId, p1.actorId] }])
    expect(cluster.transportNames).toEqual(["object-store", "socketpair", "two-rounds"])
    expect(await take(p1.groupRank("pair"))).toBe(1)
    expect((await cluster.inspect()).processes[p0.actorId].groups).toEqual(["pair"])
    for (const n of [8, 8192]) {
      const before = await bytesMoved("socketpair")
      const ref = p0.nested(n, n)
      const expected = nested(n, n)
      expect(await take(p1.digest(ref))).toEqual(digest(expected))
      // Small or not, the bytes went over the socketpair transport.
      const bytes = tensorsOf(expected).reduce((sum, [, t]) => sum + t.nbytes, 0)
      expect(await bytesMoved("socketpair")).toBe(before + bytes)
      ref.release()
    }
    expect(await moved(p1, p0, 4)).toBe(4 * (LARGE / 4))
    await group.destroy()
    expect((await cluster.inspect()).processes[p0.actorId].groups).toEqual([])
  })

  it("can be destroyed and created again; without it transfers fail at submission", async () => {
    for (let round = 0; round < 2; round++) {
      const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "again" })
      expect(await moved(p0, p1, round + 1)).toBe((round + 1) * (LARGE / 4))
      await group.destroy()
      const made = p0.make(LARGE, 1)
      expect(() => p1.sum(made)).toThrow(MissingGroupError)
      made.release()
    }
  })

  it("a pair shares at most one group per backend", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair" })
    await expect(cluster.createCollectiveGroup([p1, p0], { backend: "socketpair" })).rejects.toBeInstanceOf(GroupConflictError)
    await expect(cluster.createCollectiveGroup([p2, p1, p0], { backend: "socketpair" })).rejects.toMatchObject({
      _tag: "GroupConflictError",
      backend: "socketpair",
    })
    await expect(cluster.createCollectiveGroup([p1, p2], { backend: "socketpair", name: group.name })).rejects.toBeInstanceOf(
      GroupConflictError,
    )
    // The failed attempts left the existing group working.
    expect(await moved(p0, p1, 5)).toBe(5 * (LARGE / 4))
    await group.destroy()
  })

  it("an actor can be in several groups at once", async () => {
    const left = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "left" })
    const right = await cluster.createCollectiveGroup([p2, p0], { backend: "socketpair", name: "right" })
    expect([...(await cluster.inspect()).processes[p0.actorId].groups].sort()).toEqual(["left", "right"])
    expect(await take(p0.groupRank("right"))).toBe(1)
    expect(await moved(p0, p1, 6)).toBe(6 * (LARGE / 4))
    expect(await moved(p0, p2, 7)).toBe(7 * (LARGE / 4))
    expect(await moved(p2, p0, 8)).toBe(8 * (LARGE / 4))
    // p1 and p2 share no group.
    const made = p1.make(LARGE, 1)
    expect(() => p2.sum(made)).toThrow(MissingGroupError)
    made.release()
    await right.destroy()
    expect(await moved(p1, p0, 9)).toBe(9 * (LARGE / 4))
    await left.destroy()
  })

  it("an application error reaches the consumer and leaves the group usable", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair" })
    const failed = p0.boom("no tensor for you")
    const dependent = p1.sum(failed)
    await expect(cluster.get(dependent)).rejects.toBeInstanceOf(ApplicationError)
    await expect(cluster.get(dependent)).rejects.toMatchObject({ remoteName: "RangeError", method: "boom" })
    failed.release()
    dependent.release()
    expect(await moved(p0, p1, 10)).toBe(10 * (LARGE / 4))
    await group.destroy()
  })
})

describe("allGather through the control plane", () => {
  it("gives every member every blob by rank, round after round", async () => {
    const group = await cluster.createCollectiveGroup([p2, p0, p1], { backend: "socketpair", name: "gather" })
    for (const round of ["a", "bb"]) {
      const texts = [p2, p0, p1].map((p, rank) => `${round}${rank}`.repeat(rank * 1000 + 1))
      const results = await Promise.all([p2, p0, p1].map((p, rank) => take(p.gather("gather", texts[rank]))))
      for (const result of results) expect(result).toEqual(texts)
    }
    await group.destroy()
  })

  it("a member that does not come fails the round on every member that did; the next round lines up", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1, p2], { backend: "socketpair", name: "late" })
    const early = await Promise.all([p0, p1].map((p) => rejection(take(p.gather("late", "x", 300)))))
    for (const error of early) expect(error).toMatchObject({ _tag: "TimeoutError", message: expect.stringContaining("ranks 2") })
    await expect(take(p2.gather("late", "x"))).rejects.toMatchObject({ _tag: "TimeoutError" })
    const results = await Promise.all([p0, p1, p2].map((p, rank) => take(p.gather("late", `r${rank}`))))
    for (const result of results) expect(result).toEqual(["r0", "r1", "r2"])
    await group.destroy()
  })

  it("a transport may gather more than once to create a group; the members' own rounds come after", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "two-rounds", timeoutMs: 10_000 })
    expect(await Promise.all([take(p0.gather(group.name, "r0")), take(p1.gather(group.name, "r1"))])).toEqual([["r0", "r1"], ["r0", "r1"]])
    await group.destroy()
  })

  it("a member's group destroyed and made again under its name is another group: a gather in the old one fails", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "again" })
    const when = join(fs.mkdtempSync(join(os.tmpdir(), "tensorlane-groups-test-")), "go")
    try {
      const stale = take(p0.gatherWhen("again", "old", when)).catch((e: unknown) => e)
      await eventually(() => fs.existsSync(`${when}.member`), Boolean, 10_000)
      await group.destroy()
      const again = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "again" })
      const fresh = take(p1.gather("again", "p1"))
      fs.writeFileSync(when, "")
      expect(await stale).toMatchObject({ _tag: "MissingGroupError", message: expect.stringContaining("destroyed") })
      // The old group's blob joined no round of the new one: its first round waits for p0's own.
      expect(await Promise.all([take(p0.gather("again", "p0")), fresh])).toEqual([["p0", "p1"], ["p0", "p1"]])
      await again.destroy()
    } finally {
      fs.rmSync(dirname(when), { recursive: true, force: true })
    }
  })

  it("fails with MissingGroupError when the group is destroyed during a round, and outside any group", async () => {
    const group = await cluster.createCollectiveGroup([p0, p1], { backend: "socketpair", name: "gone" })
    const when = join(fs.mkdtempSync(join(os.tmpdir(), "tensorlane-groups-test-")), "go")
    try {
      fs.writeFileSync(when, "")
      const waiting = rejection(take(p0.gatherWhen("gone", "x", when, 30_000)))
      // Its membership taken, p0 asks to gather at once: 200 ms for that message to reach the driver.
      await eventually(() => fs.existsSync(`${when}.member`), Boolean, 10_000)
      await sleep(200)
      await group.destroy()
      expect(await waiting).toMatchObject({ _tag: "MissingGroupError", message: expect.stringContaining("destroyed") })
    } finally {
      fs.rmSync(dirname(when), { recursive: true, force: true })
    }
    await expect(take(p2.gather("gone", "x"))).rejects.toBeInstanceOf(MissingGroupError)
  })
})

describe("failed creation", () => {
  it("a member that dies during creation fails it at once; its partner can form a group again", async () => {
    const [x, y, z] = await cluster.spawn(PairWorker, { count: 3 })
    const pid = await take(y.pid())
    process.kill(pid, "SIGSTOP")
    const started = Date.now()
    const creating = cluster.createCollectiveGroup([x, y], { backend: "socketpair", timeoutMs: 30_000 })
    await sleep(300)
    process.kill(pid, "SIGKILL")
    expect(tagOf(await rejection(creating))).toBe("ActorDiedError")
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(cluster.listGroups().filter((g) => g.members.includes(x.actorId))).toEqual([])
    const again = await cluster.createCollectiveGroup([x, z], { backend: "socketpair" })
    expect(await moved(x, z, 2)).toBe(2 * (LARGE / 4))
    await again.destroy()
  })

  it("destroying a group waits for a member that does not answer (stopped) at most the group's timeout", async () => {
    const [x, y] = await cluster.spawn(PairWorker, { count: 2 })
    const group = await cluster.createCollectiveGroup([x, y], { backend: "socketpair", timeoutMs: 1500 })
    const pid = await take(y.pid())
    process.kill(pid, "SIGSTOP")
    try {
      const started = Date.now()
      await group.destroy()
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(cluster.listGroups().map((g) => g.name)).not.toContain(group.name)
    } finally {
      process.kill(pid, "SIGCONT")
    }
    await cluster.kill(y)
    await cluster.kill(x)
  })

  it("a member that dies fails allGather on the others at once", async () => {
    const [x, y] = await cluster.spawn(PairWorker, { count: 2 })
    const group = await cluster.createCollectiveGroup([x, y], { backend: "socketpair" })
    const waiting = rejection(take(x.gather(group.name, "x", 30_000)))
    await sleep(200)
    process.kill(await take(y.pid()), "SIGKILL")
    expect(await waiting).toMatchObject({ _tag: "ActorDiedError" })
    await group.destroy()
  })
})

