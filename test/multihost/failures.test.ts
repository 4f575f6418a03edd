/**
 * Failures of a cluster across hosts, each with its timing: a host that dies, a link that goes
 * down, a driver killed or cut off, a node restarted. The bounds are the documented ones
 * (docs/failures-and-timeouts.md): a host's actors fail within 5 s, a dead or cut-off driver's
 * actors end within 10 s. And Postgres down: what runs goes on, longer than the driver's lease,
 * placements fail after their timeout, and all recovers once it is back.
 */
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { ActorDiedError, ObjectLostError, TimeoutError } from "@tensorlane/core"
import { describe, expect, it } from "vitest"
import { HostWorker } from "../fixtures/hostActors.ts"
import { digest, sample } from "../fixtures/samples.ts"
import { sleep } from "../helpers.ts"
import { harnessUnavailable } from "./harness.ts"
import { HOST_TRANSPORTS, alive, startNode, stopNode, useHosts } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host failure tests: ${unavailable}`)

const ABANDONED_DRIVER = fileURLToPath(new URL("fixtures/abandonedDriver.ts", import.meta.url))
const BLOCKED_DRIVER = fileURLToPath(new URL("fixtures/blockedDriver.ts", import.meta.url))
const N = 1 << 16
/** How long a node keeps a driver's actors without a renewal of its lease (docs/failures-and-timeouts.md). */
const DRIVER_LEASE_MS = 6_000

/** A driver fixture in a child process: each `line()` is the next JSON line it prints; `closed`, its exit code once its output is closed. */
const startDriver = (fixture: string, args: ReadonlyArray<string>) => {
  const driver = spawn(process.execPath, ["--import", "tsx", fixture, ...args], { stdio: ["ignore", "pipe", "inherit"] })
  const lines = createInterface({ input: driver.stdout! })[Symbol.asyncIterator]()
  const closed = new Promise<number | null>((resolve) => driver.once("close", resolve))
  const line = async (): Promise<unknown> => {
    const next = await lines.next()
    if (next.done === true) throw new Error(`the driver exited (${await closed}) before it printed what the test waits for`)
    return JSON.parse(next.value)
  }
  return { driver, line, closed }
}

/** Milliseconds until `promise` rejects, and its error. */
const timedRejection = async (promise: Promise<unknown>): Promise<{ ms: number; error: unknown }> => {
  const t0 = Date.now()
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  return { ms: Date.now() - t0, error }
}

describe.skipIf(unavailable !== undefined)("failures of a cluster across 3 hosts", () => {
  const hosts = useHosts({ hosts: 3 }, HOST_TRANSPORTS)

  it("a host that dies: its actors fail with ActorDiedError naming it within 5 s, its objects with ObjectLostError; the rest goes on, and a group without it can be made", async () => {
    const [a, b, c] = await hosts.cluster.spawn(HostWorker, { count: 3 })
    const group = await hosts.cluster.createCollectiveGroup([a!, b!, c!], { backend: "gloo" })
    const held = b!.objectStore(N, 1)
    await hosts.cluster.get(a!.digest(held))
    // b waits in the allreduce for ranks that never join.
    const pending = timedRejection(hosts.cluster.get(b!.allreduce(group.name, 1 << 20)))
    // The host dies with every process on it: the node and the actors.
    await hosts.env.kill("h2")
    const died = await pending
    expect(died.error).toBeInstanceOf(ActorDiedError)
    expect((died.error as ActorDiedError).message).toMatch(/host h2/)
    expect(died.ms).toBeLessThan(5_000)
    const later = await hosts.cluster.get(b!.digest(held)).catch((e: unknown) => e)
    expect(later).toBeInstanceOf(ActorDiedError)
    expect((later as ActorDiedError).message).toMatch(/host h2/)
    const lost = await hosts.cluster.get(held).catch((e: unknown) => e)
    expect(lost).toBeInstanceOf(ObjectLostError)
    expect((lost as ObjectLostError).host).toBe("h2")
    // h1 and h3 go on, and move objects between them.
    const want = digest({ f: sample("float32", N, 3), i: [sample("int64", N / 2, 4)], b: sample("uint8", 64, 5) })
    expect(await hosts.cluster.get(c!.digest(a!.objectStore(N, 3)))).toEqual(want)
    // The group that held h2 is broken; once destroyed, one without h2 can be made and used (ranks add 1 and 3).
    await expect(hosts.cluster.get([a!.allreduce(group.name, 16), c!.allreduce(group.name, 16)])).rejects.toThrow()
    await group.destroy()
    const smaller = await hosts.cluster.createCollectiveGroup([a!, c!], { backend: "gloo" })
    expect(await hosts.cluster.get([a!.allreduce(smaller.name, 16), c!.allreduce(smaller.name, 16)])).toEqual([[4, 4, 4, 4], [4, 4, 4, 4]])
    // A node started again on h2 rejoins: actors are placed there again.
    hosts.nodes.set("h2", await startNode(hosts.env, "h2"))
    const [again] = await hosts.cluster.spawn(HostWorker, { host: "h2" })
    expect(await hosts.cluster.get(again!.digest(a!.objectStore(N, 3)))).toEqual(want)
    held.release()
    await Promise.all([a, c, again].map((x) => hosts.cluster.kill(x!)))
  })

  it("a link taken down: the host's actors fail within 5 s; its node ends the driver's actors there; it serves again once the link is back", async () => {
    const [onH3] = await hosts.cluster.spawn(HostWorker, { host: "h3" })
    const { pid } = await hosts.cluster.get(onH3!.where())
    hosts.env.linkDown("h3")
    try {
      const died = await timedRejection(hosts.cluster.get(onH3!.busy(60_000)))
      expect(died.error).toBeInstanceOf(ActorDiedError)
      expect((died.error as ActorDiedError).message).toMatch(/host h3/)
      expect(died.ms).toBeLessThan(5_000)
      // hosts() lists the live runners: the cut-off host is not among them.
      const t0 = Date.now()
      expect((await hosts.cluster.hosts()).map((h) => h.name)).toEqual(["h1", "h2"])
      expect(Date.now() - t0).toBeLessThan(6_000)
      // The node, cut off from the driver as well, ends the driver's actor on its own.
      const deadline = Date.now() + 10_000
      while (alive(pid) && Date.now() < deadline) await sleep(100)
      expect(alive(pid)).toBe(false)
    } finally {
      hosts.env.linkUp("h3")
    }
    const [back] = await hosts.cluster.spawn(HostWorker, { host: "h3" })
    expect((await hosts.cluster.get(back!.where())).glooHost).toBe(hosts.env.hosts[2]!.address)
    await hosts.cluster.kill(back!)
  })

  it("a driver that dies: every node ends its actors within 10 s", async () => {
    const { driver, line } = startDriver(ABANDONED_DRIVER, [hosts.env.clusterFile, "h1", "h3"])
    const { pids } = (await line()) as { pids: Array<number> }
    expect(pids.every(alive)).toBe(true)
    const t0 = Date.now()
    driver.kill("SIGKILL")
    while (pids.some(alive) && Date.now() - t0 < 15_000) await sleep(100)
    expect(pids.filter(alive)).toEqual([])
    expect(Date.now() - t0).toBeLessThan(10_000)
  })

  it("a driver whose main thread blocks for longer than its lease: its actors live on and answer its calls, and end when it shuts down", async () => {
    const { driver, line, closed } = startDriver(BLOCKED_DRIVER, [hosts.env.clusterFile, String(DRIVER_LEASE_MS + 3_000), "h1", "h3"])
    try {
      const { pids } = (await line()) as { pids: Array<number> }
      expect(await line()).toEqual({ pids })
      expect(await closed).toBe(0)
      const t0 = Date.now()
      while (pids.some(alive) && Date.now() - t0 < 10_000) await sleep(100)
      expect(pids.filter(alive)).toEqual([])
    } finally {
      driver.kill("SIGKILL")
    }
  })

  it("a driver cut off but alive: every node ends its actors within 10 s; back, its calls to them fail with ActorDiedError naming their hosts, and it spawns again", async () => {
    const placed = ["h1", "h3"]
    const actors = await hosts.cluster.spawn(HostWorker, { count: 2, hosts: placed })
    const pids = (await hosts.cluster.get(actors.map((a) => a.where()))).map((w) => w.pid)
    const pending = hosts.cluster.get(actors[0]!.busy(60_000)).catch((e: unknown) => e)
    hosts.env.linkDown("driver")
    const t0 = Date.now()
    let ended: number
    try {
      while (pids.some(alive) && Date.now() - t0 < 15_000) await sleep(100)
      ended = Date.now() - t0
    } finally {
      hosts.env.linkUp("driver")
    }
    expect(pids.filter(alive)).toEqual([])
    expect(ended).toBeLessThan(10_000)
    // The driver knows its lease ran out: the call it had under way failed, and so do new ones.
    expect(await pending).toBeInstanceOf(ActorDiedError)
    for (const [i, host] of placed.entries()) {
      const error = await hosts.cluster.get(actors[i]!.where()).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ActorDiedError)
      expect((error as ActorDiedError).message).toMatch(new RegExp(`host ${host}\\b`))
    }
    const again = await hosts.cluster.spawn(HostWorker, { count: 2, hosts: placed })
    const where = await hosts.cluster.get(again.map((a) => a.where()))
    expect(where.map((w) => w.glooHost)).toEqual([hosts.env.hosts[0]!.address, hosts.env.hosts[2]!.address])
    await Promise.all(again.map((a) => hosts.cluster.kill(a)))
  })

  it("a node ended with SIGTERM ends the actors it started, which the driver sees die; started again, it serves", async () => {
    const [onH1] = await hosts.cluster.spawn(HostWorker, { host: "h1" })
    const { pid } = await hosts.cluster.get(onH1!.where())
    const call = timedRejection(hosts.cluster.get(onH1!.busy(60_000)))
    await stopNode(hosts.nodes.get("h1")!)
    expect(alive(pid)).toBe(false)
    const died = await call
    expect(died.error).toBeInstanceOf(ActorDiedError)
    expect((died.error as ActorDiedError).message).toMatch(/host h1/)
    hosts.nodes.set("h1", await startNode(hosts.env, "h1"))
    const [again] = await hosts.cluster.spawn(HostWorker, { host: "h1" })
    expect((await hosts.cluster.get(again!.where())).glooHost).toBe(hosts.env.hosts[0]!.address)
    await hosts.cluster.kill(again!)
  })

  it("Postgres down for longer than the driver's lease: actors and transfers go on, a placement fails with TimeoutError after its 5 s, and all recovers once it is back", async () => {
    const [a, b] = await hosts.cluster.spawn(HostWorker, { count: 2, hosts: ["h1", "h2"] })
    const pids = (await hosts.cluster.get([a!.where(), b!.where()])).map((w) => w.pid)
    const want = digest({ f: sample("float32", N, 3), i: [sample("int64", N / 2, 4)], b: sample("uint8", 64, 5) })
    await hosts.env.stopPostgres()
    const down = Date.now()
    try {
      // Longer than the engine's lock expiration: the runners have found their storage gone.
      await sleep(4_000)
      expect(await hosts.cluster.get(b!.digest(a!.objectStore(N, 3)))).toEqual(want)
      const refused = await timedRejection(hosts.cluster.spawn(HostWorker, { host: "h3" }))
      expect(refused.error).toBeInstanceOf(TimeoutError)
      expect(refused.ms).toBeGreaterThanOrEqual(4_500)
      expect(refused.ms).toBeLessThan(8_000)
      // Past the driver's lease, with margin: the renewals go on without Postgres, and so do the actors.
      await sleep(down + DRIVER_LEASE_MS + 2_000 - Date.now())
      expect(await hosts.cluster.get(a!.digest(b!.objectStore(N, 3)))).toEqual(want)
      expect(pids.every(alive)).toBe(true)
    } finally {
      await hosts.env.startPostgres()
    }
    const [c] = await hosts.cluster.spawn(HostWorker, { host: "h3" })
    // Past the driver's wait for the runners' heartbeats: it takes no host for dead once Postgres is back.
    await sleep(4_000)
    expect(await hosts.cluster.get(c!.digest(b!.objectStore(N, 3)))).toEqual(want)
    expect(await hosts.cluster.get(a!.digest(b!.objectStore(N, 3)))).toEqual(want)
    await Promise.all([a, b, c].map((x) => hosts.cluster.kill(x!)))
  })
})
