/**
 * Bounded starts and the ends of actors and calls: spawn counts, the start timeout, shutdown while
 * actors start, `kill` of a wedged actor, `cancel` of queued and running calls, and shutdown with
 * releases under way.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { type ActorHandle, type Cluster, type ObjectRef, Tensor, TensorlaneCluster, start } from "@tensorlane/core"
import { Effect } from "effect"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"
import { Cancellable, NeverReady } from "./fixtures/lifecycleActors.mjs"
import { eventually, expectClean, isGone, rejection, sleep, take as takeFrom } from "./helpers.ts"

const LARGE = 1 << 20
const ASYNC_RELEASE = fileURLToPath(new URL("./fixtures/asyncReleaseTransport.mjs", import.meta.url))

let cluster: Cluster
let a: ActorHandle<typeof Cancellable>
let b: ActorHandle<typeof Cancellable>
const take = <T>(ref: ObjectRef<T>) => takeFrom(cluster)(ref)

/** NeverReady actors write their pids under here: whatever a failing test leaves alive is killed in afterAll. */
let pidRoot: string
let pidDirs = 0
/** A directory of its own for the NeverReady actors of one test (their ids repeat from cluster to cluster). */
const pidDir = (): string => {
  const dir = join(pidRoot, String(pidDirs++))
  fs.mkdirSync(dir)
  return dir
}
const pidsIn = (dir: string, ids: ReadonlyArray<string>): Array<number> => ids.map((id) => Number(fs.readFileSync(join(dir, id), "utf8")))

/** Where a and b say which of their calls began. */
let startedDir: string
const startedOn = (actor: ActorHandle<typeof Cancellable>): Array<string> => {
  const file = join(startedDir, actor.actorId)
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : []
}

beforeAll(async () => {
  pidRoot = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-pids-"))
  startedDir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-started-"))
  cluster = await start()
  ;[a, b] = await cluster.spawn(Cancellable, { count: 2, env: { TENSORLANE_TEST_STARTED_DIR: startedDir } })
}, 60_000)

afterAll(async () => {
  await cluster?.shutdown()
  for (const file of fs.readdirSync(pidRoot, { recursive: true, encoding: "utf8" })) {
    const path = join(pidRoot, file)
    if (!fs.statSync(path).isFile()) continue
    const pid = Number(fs.readFileSync(path, "utf8"))
    if (!isGone(pid)) process.kill(pid, "SIGKILL")
  }
  fs.rmSync(pidRoot, { recursive: true, force: true })
  fs.rmSync(startedDir, { recursive: true, force: true })
})

describe("spawn", () => {
  it("refuses counts that are not an integer from 1 to 256, and bad start timeouts, before any process starts", async () => {
    // 1e6 last: before counts were checked it started processes for ever.
    for (const count of [-1, Number.NaN, 1.5, 0, 257, "2", 1e6]) {
      await expect(cluster.spawn(Cancellable, { count: count as number })).rejects.toMatchObject({ _tag: "InvalidArgumentError", argument: "count" })
    }
    for (const startTimeoutMs of [Number.NaN, -1, "60000"]) {
      await expect(cluster.spawn(Cancellable, { startTimeoutMs: startTimeoutMs as number })).rejects.toMatchObject({
        _tag: "InvalidArgumentError",
        argument: "startTimeoutMs",
      })
    }
    expect(Object.keys((await cluster.inspect()).processes).sort()).toEqual(["Cancellable-0", "Cancellable-1", "driver"])
  })

  it("fails with TimeoutError once startTimeoutMs has passed, every process it started gone", async () => {
    const dir = pidDir()
    const started = performance.now()
    const error = await rejection(cluster.spawn(NeverReady, { count: 2, startTimeoutMs: 1_500, env: { TENSORLANE_TEST_PID_DIR: dir } }))
    const ms = performance.now() - started
    expect(error).toMatchObject({ _tag: "TimeoutError", timeoutMs: 1_500 })
    expect((error as Error).message).toContain("NeverReady-0, NeverReady-1 did not start within 1500 ms")
    expect(ms).toBeGreaterThanOrEqual(1_400)
    expect(ms).toBeLessThan(5_000)
    expect(pidsIn(dir, ["NeverReady-0", "NeverReady-1"]).filter((pid) => !isGone(pid))).toEqual([])
  }, 20_000)

  it("is ended by shutdown while its actors start: it fails with ClusterClosedError and leaves no process", async () => {
    const dir = pidDir()
    const other = await start()
    const spawning = rejection(other.spawn(NeverReady, { env: { TENSORLANE_TEST_PID_DIR: dir } }))
    await eventually(() => fs.existsSync(join(dir, "NeverReady-0")), (there) => there, 20_000)
    const [pid] = pidsIn(dir, ["NeverReady-0"])
    const began = performance.now()
    await other.shutdown()
    expect(performance.now() - began).toBeLessThan(2_000)
    expect(isGone(pid!)).toBe(true)
    expect(await spawning).toMatchObject({ _tag: "ClusterClosedError" })
  }, 30_000)
})

describe("kill", () => {
  it("ends a wedged actor: its pending and later calls and its objects fail with ActorDiedError; the others go on", async () => {
    const [x, y] = await cluster.spawn(Cancellable, { count: 2 })
    const pid = await take(x.pid())
    const small = x.make(16)
    const large = x.make(LARGE)
    await cluster.get([small, large])
    const wedged = x.spinThenMake(600_000, 4)
    const queued = x.note("queued")
    await sleep(200)
    await cluster.kill(x)
    expect(isGone(pid)).toBe(true)
    const later = x.note("later")
    const taking = y.note(large)
    for (const ref of [wedged, queued, later, large, taking]) {
      await expect(cluster.get(ref, { timeoutMs: 5_000 })).rejects.toMatchObject({ _tag: "ActorDiedError", actor: x.actorId })
    }
    // A small value travelled inline with its result: the driver still has it.
    expect((await cluster.get(small)).sum()).toBe(16)
    expect(await take(y.note("still here"))).toBe("still here")
    await cluster.kill(x)
    expect(Object.keys((await cluster.inspect()).processes)).not.toContain(x.actorId)
    for (const ref of [small, large, wedged, queued, later, taking]) ref.release()
    await Effect.runPromise(TensorlaneCluster.kill(y).pipe(Effect.provideService(TensorlaneCluster.TensorlaneCluster, cluster)))
    expect(Object.keys((await cluster.inspect()).processes)).not.toContain(y.actorId)
  })
})

describe("cancel", () => {
  beforeEach(async () => {
    await Promise.all([take(a.clear()), take(b.clear())])
    for (const file of fs.readdirSync(startedDir)) fs.rmSync(join(startedDir, file))
  })
  afterEach(() => expectClean(cluster))

  it("fails a running call with CancelledError and aborts its signal; the actor takes new calls", async () => {
    const running = a.untilCancelled("first")
    await eventually(() => take(a.log()), (log) => log.includes("first started"), 10_000)
    cluster.cancel(running)
    await expect(cluster.get(running, { timeoutMs: 2_000 })).rejects.toMatchObject({ _tag: "CancelledError", objectId: running.id })
    expect(await take(a.note("next"))).toBe("next")
    expect(await take(a.log())).toEqual(["first started", "first aborted", "next"])
    running.release()
  })

  it("never runs a call queued in its actor; the calls behind it run", async () => {
    // Both of a's slots taken: the third call waits in the actor's queue.
    const one = a.untilCancelled("one")
    const two = a.untilCancelled("two")
    const queued = a.note("queued")
    const after = a.note("after")
    await eventually(() => startedOn(a), (started) => started.length === 2, 10_000)
    cluster.cancel(queued)
    await expect(cluster.get(queued, { timeoutMs: 2_000 })).rejects.toMatchObject({ _tag: "CancelledError", objectId: queued.id })
    cluster.cancel(one)
    cluster.cancel(two)
    expect(await cluster.get(after, { timeoutMs: 5_000 })).toBe("after")
    // "after" takes the first slot freed, so it may run before the second abort reaches the actor.
    const log = await take(a.log())
    expect(log.slice(0, 3)).toEqual(["one started", "two started", "one aborted"])
    expect(log.slice(3).sort()).toEqual(["after", "two aborted"])
    for (const ref of [one, two, queued, after]) ref.release()
  })

  it("of a call waiting for an argument cancels that call only: its producer finishes, and the calls behind it run", async () => {
    const produced = a.spinThenMake(1_500, 8)
    const consumer = b.note(produced)
    const behind = b.note("behind")
    const began = performance.now()
    cluster.cancel(consumer)
    await expect(cluster.get(consumer, { timeoutMs: 1_000 })).rejects.toMatchObject({ _tag: "CancelledError", objectId: consumer.id })
    expect(await cluster.get(behind, { timeoutMs: 1_000 })).toBe("behind")
    expect(performance.now() - began).toBeLessThan(1_000)
    expect((await cluster.get(produced)).numel).toBe(8)
    expect(await take(b.log())).toEqual(["behind"])
    for (const ref of [produced, consumer, behind]) ref.release()
  })

  it("of a running call that ignores its signal fails its ref and its dependents at once, and frees what it returns", async () => {
    const running = a.spinThenMake(1_000, LARGE)
    const dependent = b.note(running)
    await eventually(() => startedOn(a), (started) => started.length === 1, 10_000)
    const began = performance.now()
    cluster.cancel(running)
    await expect(cluster.get(running)).rejects.toMatchObject({ _tag: "CancelledError", objectId: running.id })
    await expect(cluster.get(dependent)).rejects.toMatchObject({ _tag: "CancelledError", objectId: running.id })
    expect(performance.now() - began).toBeLessThan(500)
    // The method ran to its end; afterEach finds its result freed.
    expect(await take(a.log())).toEqual(["spun 1000"])
    for (const ref of [running, dependent]) ref.release()
  })

  it("is a no-op for a finished call, also through the Effect face; a released ref is refused", async () => {
    const done = a.make(LARGE)
    expect((await cluster.get(done)).numel).toBe(LARGE)
    cluster.cancel(done)
    await Effect.runPromise(TensorlaneCluster.cancel(done).pipe(Effect.provideService(TensorlaneCluster.TensorlaneCluster, cluster)))
    expect((await cluster.get(done)).sum()).toBe(LARGE)
    done.release()
    expect(() => cluster.cancel(done)).toThrow(expect.objectContaining({ _tag: "ObjectFreedError" }))
  })
})

describe("shutdown", () => {
  let releaseDir: string
  beforeAll(() => {
    releaseDir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-release-"))
  })
  afterAll(() => fs.rmSync(releaseDir, { recursive: true, force: true }))

  it("waits for the releases under way of a transport whose release is async", async () => {
    // Read by the transport in every process of the cluster (actors inherit the driver's environment).
    process.env.TENSORLANE_TEST_RELEASE_DIR = releaseDir
    const other = await start({ transports: [ASYNC_RELEASE] })
    try {
      const [x] = await other.spawn(Helper)
      const make = x.make.options({ tensorTransport: "asyncrelease" })
      const refs = [make(LARGE), make(LARGE), make(64), await other.put(Tensor.full([LARGE], 2), { tensorTransport: "asyncrelease" })]
      await other.get(refs)
      expect(fs.readdirSync(releaseDir)).toHaveLength(4)
      for (const ref of refs) ref.release()
    } finally {
      await other.shutdown()
      delete process.env.TENSORLANE_TEST_RELEASE_DIR
    }
    expect(fs.readdirSync(releaseDir)).toEqual([])
  })
})
