/**
 * What a node bounds: the actors it runs (its host's maxActors), what a spawn it cannot start costs
 * (the spawn fails, the node lives on), how long a connection may take for its handshake and its
 * first message, and how long a connection that its peer never closes keeps the node from stopping.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import { ActorDiedError, ActorLimitError, type Cluster, start, tlsOptionsFor } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FrameReader, encodeFrame } from "../../packages/core/src/internal/frame.ts"
import { PROTOCOL_VERSION } from "../../packages/core/src/internal/messages.ts"
import { HostWorker } from "../fixtures/hostActors.ts"
import { rejection } from "../helpers.ts"
import { type Harness, harnessUnavailable, startHosts } from "./harness.ts"
import { HOST_TRANSPORTS, type RunningNode, failedNode, startNode, stopNode } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host tests of a node's bounds: ${unavailable}`)

const MAX_ACTORS = 2
const NODE_PORT = 7400

/** Resolves with the ms from now until `socket` closes (its peer's doing: this side never ends it). */
const closesAfter = (socket: net.Socket): Promise<number> => {
  const from = Date.now()
  socket.on("error", () => undefined)
  return new Promise((resolve) => socket.once("close", () => resolve(Date.now() - from)))
}

describe.skipIf(unavailable !== undefined)("a node's bounds", () => {
  let env: Harness
  let node: RunningNode
  let cluster: Cluster
  let host: string
  let driverTls: tls.ConnectionOptions

  /** A connection to h1's node under the driver's certificate, open once its handshake is done; it never ends its side. */
  const connect = (): Promise<tls.TLSSocket> =>
    new Promise((resolve, reject) => {
      // allowHalfOpen: tls.connect passes it on to its socket, though its type does not say so.
      const socket = tls.connect({ ...driverTls, host, port: NODE_PORT, allowHalfOpen: true } as tls.ConnectionOptions)
      socket.once("secureConnect", () => resolve(socket))
      socket.once("error", reject)
    })

  beforeAll(async () => {
    env = await startHosts({ hosts: 1 })
    host = env.hosts[0]!.address
    // Beside the harness's config, so that its relative paths name the same files.
    const limited = path.join(path.dirname(env.clusterFile), "limited.json")
    const file = JSON.parse(fs.readFileSync(env.clusterFile, "utf8")) as { hosts: Array<Record<string, unknown>> }
    file.hosts[0]!.maxActors = MAX_ACTORS
    fs.writeFileSync(limited, JSON.stringify(file))
    driverTls = tlsOptionsFor(env.config, env.config.drivers[0]!.name).client("h1")
    node = await startNode(env, "h1", limited)
    cluster = await start({ cluster: limited, transports: HOST_TRANSPORTS })
  }, 120_000)
  afterAll(async () => {
    await cluster?.shutdown()
    if (node !== undefined) await stopNode(node)
    await env?.teardown()
  }, 60_000)

  it("a spawn past the host's maxActors fails with ActorLimitError naming the host and its limit; once one ends, a spawn fits again", async () => {
    const actors = await cluster.spawn(HostWorker, { count: MAX_ACTORS, host: "h1" })
    const error = await rejection(cluster.spawn(HostWorker, { host: "h1" }))
    expect(error).toBeInstanceOf(ActorLimitError)
    expect(error).toMatchObject({ host: "h1", limit: MAX_ACTORS })
    await cluster.kill(actors[0]!)
    const [again] = await cluster.spawn(HostWorker, { host: "h1" })
    expect((await cluster.get(again!.where())).pid).toBeGreaterThan(0)
    for (const a of [actors[1]!, again!]) await cluster.kill(a)
  })

  it("an actor process the node cannot start (its launcher not found) fails the spawn with ActorDiedError; the node lives on and spawns", async () => {
    // The launcher (setpriv, or Node itself) is looked up on the actor's PATH.
    const error = await rejection(cluster.spawn(HostWorker, { host: "h1", env: { PATH: "/nonexistent" } }))
    expect(error).toBeInstanceOf(ActorDiedError)
    expect((error as ActorDiedError).message).toMatch(/could not be started on host h1: spawn \S+ ENOENT/)
    expect(node.child.exitCode).toBeNull()
    const [actor] = await cluster.spawn(HostWorker, { host: "h1" })
    expect((await cluster.get(actor!.where())).pid).toBeGreaterThan(0)
    await cluster.kill(actor!)
  })

  it("a first message trickled in a byte a second is cut at its 10 s deadline", async () => {
    const socket = await connect()
    const closed = closesAfter(socket)
    const frame = Buffer.concat(encodeFrame({ _tag: "Spawn", protocol: PROTOCOL_VERSION, clusterId: "x".repeat(64), actorId: "a", moduleUrl: "file:///a.js", execArgv: [], env: {} }))
    let sent = 0
    const trickle = setInterval(() => socket.write(frame.subarray(sent, ++sent)), 1_000)
    const ms = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(Number.POSITIVE_INFINITY), 20_000))])
    clearInterval(trickle)
    socket.destroy()
    expect(ms).toBeGreaterThanOrEqual(9_000)
    expect(ms).toBeLessThan(13_000)
  }, 30_000)

  it("a peer that never starts its TLS handshake is dropped within 10 s by the node, its runner and an actor's agent", async () => {
    const [actor] = await cluster.spawn(HostWorker, { host: "h1" })
    const listening = await env.run("h1", ["ss", "-Hltn"])
    const ports = [...listening.stdout.matchAll(/\s(\d+\.\d+\.\d+\.\d+):(\d+)\s/g)].map((m) => Number(m[2]))
    expect(ports).toContain(NODE_PORT + 1)
    expect(ports.length).toBeGreaterThan(2)
    const waits = await Promise.all(
      ports.map(async (port) => {
        const socket = net.connect({ host, port })
        await new Promise((resolve) => socket.once("connect", resolve))
        const ms = await Promise.race([closesAfter(socket), new Promise<number>((resolve) => setTimeout(() => resolve(Number.POSITIVE_INFINITY), 20_000))])
        socket.destroy()
        return ms
      }),
    )
    const listed = (await env.run("h1", ["ss", "-Hltnp"])).stdout
    for (const [i, ms] of waits.entries()) expect(ms, `port ${ports[i]} of: ${listed}`).toBeLessThan(12_000)
    await cluster.kill(actor!)
  }, 30_000)

  it("a second node of the host fails with NodeStartError naming the port it cannot listen on, its own or its engine's; the first serves on", async () => {
    const withPort = (name: string, port: number): string => {
      const file = path.join(path.dirname(env.clusterFile), name)
      const config = JSON.parse(fs.readFileSync(env.clusterFile, "utf8")) as { hosts: Array<Record<string, unknown>> }
      config.hosts[0]!.port = port
      fs.writeFileSync(file, JSON.stringify(config))
      return file
    }
    const same = await failedNode(env, "h1", env.clusterFile)
    expect(same.code).toBe(1)
    expect(same.output).toMatch(new RegExp(`^NodeStartError: node h1 cannot listen on ${host.replaceAll(".", "\\.")}:${NODE_PORT}: .*EADDRINUSE.*; another process listens there`))
    // Its engine's port is the next one: the running node's own.
    const below = withPort("below.json", NODE_PORT - 1)
    const engine = await failedNode(env, "h1", below)
    fs.rmSync(below)
    expect(engine.code).toBe(1)
    expect(engine.output).toContain(`NodeStartError: node h1 cannot listen on ${host}:${NODE_PORT}, the cluster engine's port (the one after the host's): `)
    expect(engine.output).toContain(`another process listens there (this host's node, already running?): stop it, or give the host another port in ${below}`)
    const [worker] = await cluster.spawn(HostWorker, { host: "h1" })
    expect((await cluster.get(worker!.where())).pid).toBeGreaterThan(0)
    await cluster.kill(worker!)
  }, 60_000)

  it("refuses the spawn of a driver of another protocol, or of a release before protocol versions, whatever the rest of its form, saying what to install", async () => {
    const base = { _tag: "Spawn", clusterId: "any", actorId: "a", moduleUrl: "file:///a.js", execArgv: [], env: {} }
    for (const [spawn, says] of [
      [{ ...base, protocol: PROTOCOL_VERSION - 1 }, `protocol ${PROTOCOL_VERSION - 1}`],
      [base, "a protocol from before protocol versions"],
      // A later release's Spawn, of a form this node's schema refuses.
      [{ ...base, protocol: PROTOCOL_VERSION + 1, clusterId: 5, placement: { numa: 0 } }, `protocol ${PROTOCOL_VERSION + 1}`],
    ] as const) {
      const socket = await connect()
      socket.on("error", () => undefined)
      const reply = new Promise<unknown>((resolve) => {
        const reader = new FrameReader((frame) => resolve(frame.header))
        socket.on("data", (chunk: Buffer) => reader.push(chunk))
        socket.once("close", () => resolve("closed without an answer"))
      })
      socket.write(Buffer.concat(encodeFrame(spawn)))
      const answer = (await reply) as { _tag: string; error: { tag: string; message: string } }
      expect(answer._tag).toBe("InitFailed")
      expect(answer.error.tag).toBe("ProtocolError")
      expect(answer.error.message).toContain(`the node of host h1 speaks tensorlane's protocol ${PROTOCOL_VERSION}, driver `)
      expect(answer.error.message).toContain(` speaks ${says}: a was not started`)
      expect(answer.error.message).toContain("install the same one on host h1 (then restart its node) and on the driver's machine")
      socket.destroy()
    }
    // The node goes on spawning for a driver of its own protocol.
    const [actor] = await cluster.spawn(HostWorker, { host: "h1" })
    expect((await cluster.get(actor!.where())).pid).toBeGreaterThan(0)
    await cluster.kill(actor!)
  })

  // Last: the node stops.
  it("a node stopped with SIGTERM exits at once although a driver keeps a connection open that the node has ended", async () => {
    const socket = await connect()
    const answered = new Promise((resolve) => socket.once("data", resolve))
    // A spawn of a cluster that no node admitted: the node answers it and ends its side.
    socket.write(Buffer.concat(encodeFrame({ _tag: "Spawn", protocol: PROTOCOL_VERSION, clusterId: "unadmitted", actorId: "a", moduleUrl: "file:///a.js", execArgv: [], env: {} })))
    await answered
    socket.on("error", () => undefined)
    const from = Date.now()
    await stopNode(node)
    expect(Date.now() - from).toBeLessThan(5_000)
    socket.destroy()
  }, 30_000)
})
