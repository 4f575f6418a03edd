/**
 * A cluster across 3 hosts (network namespaces of the harness, a `tensorlane node` in each, the
 * driver in the root namespace): what the nodes report, transfers h1 -> h2 and h2 -> h3 over
 * object-store, gloo and nixl checked byte for byte, a 3-host gloo allreduce, hosts.cluster.broadcast to
 * two other hosts, and same-host transports refused across hosts.
 */
import { CrossHostError } from "@tensorlane/core"
import { describe, expect, it } from "vitest"
import { HostWorker } from "../fixtures/hostActors.ts"
import { digest, sample } from "../fixtures/samples.ts"
import { harnessUnavailable } from "./harness.ts"
import { HOST_TRANSPORTS, useHosts } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host transfer tests: ${unavailable}`)

/** Elements of the float32 tensor of a payload: 1 MiB, far past what travels inside the owner's messages. */
const N = 1 << 18

describe.skipIf(unavailable !== undefined)("a cluster across 3 hosts", () => {
  const hosts = useHosts({ hosts: 3 }, HOST_TRANSPORTS)

  it("hosts() lists every host with what its node reports", async () => {
    const listed = await hosts.cluster.hosts()
    expect(listed.map((h) => [h.name, h.address])).toEqual(hosts.env.hosts.map((h) => [h.name, h.address]))
    for (const h of listed) {
      expect(h.cpus).toBeGreaterThan(0)
      expect(h.memoryBytes).toBeGreaterThan(0)
      expect(h.gpus).toBeGreaterThanOrEqual(0)
      expect(h.transports).toContain("@tensorlane/transport-gloo")
    }
  })

  it("places actors on the hosts asked for, their data planes on the host's address and interface", async () => {
    const actors = await hosts.cluster.spawn(HostWorker, { count: 3, hosts: ["h3", "h1"] })
    const where = await hosts.cluster.get(actors.map((a) => a.where()))
    const address = (name: string) => hosts.env.hosts.find((h) => h.name === name)!.address
    expect(where.map((w) => w.glooHost)).toEqual([address("h3"), address("h1"), address("h3")])
    expect(where.map((w) => w.ucxDevices)).toEqual(["eth0", "eth0", "eth0"])
    expect(where.map((w) => w.ncclInterface)).toEqual(["eth0", "eth0", "eth0"])
    await Promise.all(actors.map((a) => hosts.cluster.kill(a)))
  })

  for (const transport of ["objectStore", "gloo", "nixl"] as const) {
    it(`moves a value h1 -> h2 and h2 -> h3 over ${transport}, byte for byte`, async () => {
      const [a, b, c] = await Promise.all(["h1", "h2", "h3"].map((host) => hosts.cluster.spawn(HostWorker, { host }).then(([actor]) => actor!)))
      if (transport === "gloo") await hosts.cluster.createCollectiveGroup([a!, b!, c!], { backend: "gloo" })
      const want = digest({ f: sample("float32", N, 11), i: [sample("int64", N / 2, 12)], b: sample("uint8", 64, 13) })
      const fromH1 = a![transport](N, 11)
      expect(await hosts.cluster.get(b!.digest(fromH1))).toEqual(want)
      const fromH2 = b![transport](N, 11)
      expect(await hosts.cluster.get(c!.digest(fromH2))).toEqual(want)
      // The driver, in the root namespace, reads it too (through its host's agent: the driver is in no
      // gloo group, and UCX in the driver would need UCX_NET_DEVICES naming the driver's interface).
      expect(digest(await hosts.cluster.get(fromH2, { useObjectStore: true }))).toEqual(want)
      fromH1.release()
      fromH2.release()
      await Promise.all([a, b, c].map((actor) => hosts.cluster.kill(actor!)))
    })
  }

  it("serves what the driver puts to actors on two hosts", async () => {
    const [a, b] = await hosts.cluster.spawn(HostWorker, { count: 2, hosts: ["h1", "h3"] })
    const value = { f: sample("float32", N, 41), i: [sample("int64", N / 2, 42)], b: sample("uint8", 64, 43) }
    const ref = await hosts.cluster.put(value)
    expect(await hosts.cluster.get([a!.digest(ref), b!.digest(ref)])).toEqual([digest(value), digest(value)])
    ref.release()
    await Promise.all([a, b].map((actor) => hosts.cluster.kill(actor!)))
  })

  it("runs a gloo allreduce across the 3 hosts", async () => {
    const actors = await hosts.cluster.spawn(HostWorker, { count: 3 })
    const group = await hosts.cluster.createCollectiveGroup(actors, { backend: "gloo" })
    // Ranks add 1, 2 and 3.
    expect(await hosts.cluster.get(actors.map((a) => a.allreduce(group.name, 4096)))).toEqual([[6, 6, 6, 6], [6, 6, 6, 6], [6, 6, 6, 6]])
    await Promise.all(actors.map((a) => hosts.cluster.kill(a)))
  })

  it("broadcasts an object from h1 to the two other hosts", async () => {
    const actors = await hosts.cluster.spawn(HostWorker, { count: 3 })
    await hosts.cluster.createCollectiveGroup(actors, { backend: "gloo" })
    const [root, ...receivers] = actors
    const ref = root!.gloo(N, 21)
    await hosts.cluster.broadcast(ref, receivers)
    const want = digest({ f: sample("float32", N, 21), i: [sample("int64", N / 2, 22)], b: sample("uint8", 64, 23) })
    expect(await hosts.cluster.get(receivers.map((r) => r.digest(ref)))).toEqual([want, want])
    ref.release()
    await Promise.all(actors.map((a) => hosts.cluster.kill(a)))
  })

  it("refuses shm between two hosts, and an shm group across hosts, with CrossHostError naming both hosts", async () => {
    const [a, b] = await hosts.cluster.spawn(HostWorker, { count: 2, hosts: ["h1", "h2"] })
    const ref = a!.shm(N, 31)
    let error: unknown
    try {
      b!.digest(ref)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(CrossHostError)
    expect((error as CrossHostError).hosts).toEqual(["h1", "h2"])
    expect((error as CrossHostError).message).toMatch(/h1.*h2/)
    await expect(hosts.cluster.createCollectiveGroup([a!, b!], { backend: "shm" })).rejects.toBeInstanceOf(CrossHostError)
    // The driver's machine is not h1 either; through the object store it reads the object all the same.
    const driverError = await hosts.cluster.get(ref).catch((e: unknown) => e)
    expect(driverError).toBeInstanceOf(CrossHostError)
    expect((driverError as CrossHostError).hosts).toEqual(["h1", "driver"])
    expect(digest(await hosts.cluster.get(ref, { useObjectStore: true }))).toEqual(digest({ f: sample("float32", N, 31), i: [sample("int64", N / 2, 32)], b: sample("uint8", 64, 33) }))
    ref.release()
    await Promise.all([a, b].map((actor) => hosts.cluster.kill(actor!)))
  })
})
