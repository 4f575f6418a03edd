/**
 * Mutual TLS on every connection between hosts: a process in a fourth namespace (a stranger on the
 * same network, without the cluster's credentials) can neither reach a node (so neither spawn nor
 * call), nor its host's runner of Effect's cluster engine, nor fetch an object from an actor's agent;
 * a certificate of another cluster and a host's certificate are refused by a node too, the Postgres
 * server's by a runner; a missing certificate or key stops a driver and a node from starting.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { CertificateError, start } from "@tensorlane/core"
import { beforeAll, describe, expect, it } from "vitest"
import { PROTOCOL_VERSION } from "../../packages/core/src/internal/messages.ts"
import { HostWorker } from "../fixtures/hostActors.ts"
import { harnessUnavailable } from "./harness.ts"
import { HOST_TRANSPORTS, useHosts } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host security tests: ${unavailable}`)

const PROBE = fileURLToPath(new URL("fixtures/probe.mjs", import.meta.url))
const CLI = fileURLToPath(new URL("../../packages/cli/dist/main.js", import.meta.url))

interface Probe {
  readonly connected: boolean
  readonly received: number
  readonly error: string | null
}

describe.skipIf(unavailable !== undefined)("the security of a cluster across hosts", () => {
  const hosts = useHosts({ hosts: 2, strangers: 1 }, HOST_TRANSPORTS)
  let other: string

  beforeAll(async () => {
    const { env } = hosts
    // Another cluster, with its own CA, on the same addresses: its certificates are valid, but not here.
    // In the harness's folder, which every host sees (each has a /tmp of its own) and teardown removes.
    other = path.join(env.folder, "other")
    const members = env.hosts.map((h) => `${h.name}=${h.address}`).join(",")
    const init = spawn(process.execPath, [CLI, "cluster", "init", "--hosts", members, "--out", path.join(other, "c")], { stdio: "ignore" })
    await new Promise((resolve) => init.once("exit", resolve))
  }, 60_000)

  /** Runs the probe in `from` (a host, a stranger) against `port` of host h1. */
  const probe = async (from: string, port: number, options: { tls: boolean; cert?: string; key?: string; frame: unknown }): Promise<Probe> => {
    const target = { host: hosts.env.hosts[0]!.address, port, ...options }
    const result = await hosts.env.run(from, [process.execPath, PROBE, JSON.stringify(target)], { timeoutMs: 10_000 })
    return JSON.parse(result.stdout.trim()) as Probe
  }

  /**
   * A spawn of a cluster id no node admitted: a node answers the driver with the spawn's failure
   * (InitFailed), and starts nothing.
   */
  const unadmitted = { _tag: "Spawn", protocol: PROTOCOL_VERSION, clusterId: "probe", actorId: "probe", moduleUrl: "file:///nonexistent.js", execArgv: [], env: {} }

  /** Ports that processes of host h1 listen on besides its node's and its runner's: its actors' agents and data planes. */
  const actorPorts = async (): Promise<Array<number>> => {
    const listening = await hosts.env.run("h1", ["ss", "-Hltn"])
    return [...listening.stdout.matchAll(/\s(\d+\.\d+\.\d+\.\d+):(\d+)\s/g)].map((m) => Number(m[2])).filter((p) => p !== 7400 && p !== 7401)
  }

  it("a stranger without credentials gets nothing from a node or its runner, over TLS or plain TCP", async () => {
    const bare = await probe("s1", 7400, { tls: true, frame: unadmitted })
    expect(bare.received).toBe(0)
    const plain = await probe("s1", 7400, { tls: false, frame: unadmitted })
    expect(plain.received).toBe(0)
    // The driver, with its certificate, is answered at the same port from the same network.
    const driver = hosts.env.config.drivers[0]!
    const answered = await probe("s1", 7400, { tls: true, cert: driver.certPath, key: driver.keyPath, frame: unadmitted })
    expect(answered.received).toBeGreaterThan(0)
    // The engine's runner (the port after the node's) speaks only mutual TLS as well: the driver's
    // certificate completes a handshake there, a stranger gets nothing.
    expect((await probe("s1", 7401, { tls: true, cert: driver.certPath, key: driver.keyPath, frame: unadmitted })).connected).toBe(true)
    for (const tls of [true, false]) expect((await probe("s1", 7401, { tls, frame: unadmitted })).received).toBe(0)
  })

  it("a node refuses another cluster's certificate, and a host's certificate spawns nothing either", async () => {
    const foreign = await probe("s1", 7400, { tls: true, cert: path.join(other, "c/drivers/driver.pem"), key: path.join(other, "c/drivers/driver.key"), frame: unadmitted })
    expect(foreign.received).toBe(0)
    const h2 = hosts.env.config.hosts[1]!
    const host = await probe("s1", 7400, { tls: true, cert: h2.certPath, key: h2.keyPath, frame: unadmitted })
    expect(host.received).toBe(0)
  })

  it("the Postgres server's key, though its certificate is from the cluster's CA, passes for no member at a node's runner", async () => {
    const postgres = path.join(path.dirname(hosts.env.config.file), "postgres")
    const asPostgres = await probe("s1", 7401, { tls: true, cert: path.join(postgres, "server.pem"), key: path.join(postgres, "server.key"), frame: unadmitted })
    expect(asPostgres.received).toBe(0)
    const driver = hosts.env.config.drivers[0]!
    // The runner answers a member's certificate, even for a frame that is not its protocol.
    expect((await probe("s1", 7401, { tls: true, cert: driver.certPath, key: driver.keyPath, frame: unadmitted })).received).toBeGreaterThan(0)
  })

  it("a stranger fetches nothing from an actor's agent", async () => {
    const [actor] = await hosts.cluster.spawn(HostWorker, { host: "h1" })
    const ref = actor!.objectStore(1 << 16, 1)
    await hosts.cluster.get(actor!.digest(ref))
    const ports = await actorPorts()
    expect(ports.length).toBeGreaterThan(0)
    const fetch = { _tag: "Fetch", reqId: 1, objectId: ref.id }
    // With the driver's certificate, the same request is answered (with the object's bytes) at one of them.
    const driver = hosts.env.config.drivers[0]!
    const answered = await Promise.all(ports.map((port) => probe("s1", port, { tls: true, cert: driver.certPath, key: driver.keyPath, frame: fetch })))
    expect(answered.some((p) => p.received > 1 << 16)).toBe(true)
    for (const port of ports) {
      expect((await probe("s1", port, { tls: true, frame: fetch })).received).toBe(0)
      const foreign = await probe("s1", port, { tls: true, cert: path.join(other, "c/drivers/driver.pem"), key: path.join(other, "c/drivers/driver.key"), frame: fetch })
      expect(foreign.received).toBe(0)
    }
    ref.release()
    await hosts.cluster.kill(actor!)
  })

  it("a missing certificate or key stops a driver and a node from starting", async () => {
    const copy = path.join(other, "missing")
    fs.cpSync(path.dirname(hosts.env.clusterFile), copy, { recursive: true })
    fs.rmSync(path.join(copy, "drivers/driver.pem"))
    fs.rmSync(path.join(copy, "hosts/h2.key"))
    const file = path.join(copy, path.basename(hosts.env.clusterFile))
    await expect(start({ cluster: file })).rejects.toBeInstanceOf(CertificateError)
    const node = await hosts.env.run("h2", [process.execPath, CLI, "node", "--config", hosts.env.clusterFile.replace(path.dirname(hosts.env.clusterFile), copy), "--name", "h2"], { timeoutMs: 20_000 })
    expect(node.code).not.toBe(0)
    expect(node.stderr).toMatch(/CertificateError/)
  })
})
