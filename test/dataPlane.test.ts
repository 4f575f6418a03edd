/**
 * Who may connect to the data plane (docs/failures-and-timeouts.md, "Who may connect to what"): a
 * gloo pair accepts only its peer, whatever another local user does while the group connects, and
 * the process it connects to must prove it is the peer; NIXL (UCX) listens on loopback only. The
 * stranger is a throwaway unprivileged user (test/fixtures/stranger.mjs), removed after.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import readline from "node:readline"
import { fileURLToPath } from "node:url"
import { start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Peer, failureOf } from "../packages/transport-gloo/test/fixtures/peers.ts"
import { NixlWorker } from "./fixtures/nixlActors.mjs"
import { sleep } from "./helpers.ts"

const USER = `tlstranger${process.pid}`
let uid: number
let gid: number

beforeAll(() => {
  execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
  uid = Number(execFileSync("id", ["-u", USER], { encoding: "utf8" }))
  gid = Number(execFileSync("id", ["-g", USER], { encoding: "utf8" }))
})

afterAll(async () => {
  await Stranger.stopAll()
  execFileSync("userdel", [USER])
})

interface ListeningSocket {
  readonly address: string
  readonly port: number
}

/** An address of /proc/net/tcp{,6}: 32-bit words in hex, each in the host's (little-endian) byte order. */
const addressOf = (hex: string): string => {
  const bytes = hex.match(/.{8}/g)!.flatMap((word) => [...Buffer.from(word, "hex").reverse()])
  if (bytes.length === 4) return bytes.join(".")
  const groups = Array.from({ length: 8 }, (_, i) => ((bytes[2 * i] << 8) | bytes[2 * i + 1]).toString(16))
  return groups.join(":")
}

const isLoopback = (address: string): boolean =>
  address.startsWith("127.") || address === "0:0:0:0:0:0:0:1" || /^0:0:0:0:0:ffff:7f/.test(address)

/** The TCP sockets that `pid` listens on, from /proc: its socket inodes, found in /proc/net/tcp and tcp6 in state LISTEN. */
const listeningSockets = (pid: number): Array<ListeningSocket> => {
  const inodes = new Set<string>()
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    const target = (() => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
      } catch {
        return "" // closed meanwhile
      }
    })()
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
    if (inode !== undefined) inodes.add(inode)
  }
  return ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((table) =>
    fs
      .readFileSync(table, "utf8")
      .split("\n")
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields.length > 9 && fields[3] === "0A" && inodes.has(fields[9]))
      .map((fields) => {
        const [address, port] = fields[1].split(":")
        return { address: addressOf(address), port: parseInt(port, 16) }
      }),
  )
}

/** A rank's blob (AddressBlob.h): 20 bytes of header, the secret, then per peer its rank, length and gloo TCP address. */
const addressAt = (blob: Uint8Array): number => 20 + new DataView(blob.buffer, blob.byteOffset).getUint32(16, true) + 8
const portAt = (blob: Uint8Array): DataView => new DataView(blob.buffer, blob.byteOffset + addressAt(blob) + 2, 2)
/** How gloo orders two ports of one host: the port's two bytes as stored (network order), read as one number. */
const glooOrder = (port: number): number => ((port & 0xff) << 8) | (port >> 8)

/** test/fixtures/stranger.mjs running as the throwaway user. */
class Stranger {
  private static readonly started = new Set<Stranger>()
  private readonly lines: Array<string> = []
  private waiting: Array<{ readonly matches: (line: string) => boolean; readonly resolve: (line: string) => void }> = []
  private nextId = 0

  private constructor(private readonly child: ChildProcess) {
    readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      this.lines.push(line)
      for (const w of this.waiting.filter((w) => w.matches(line))) w.resolve(line)
      this.waiting = this.waiting.filter((w) => !w.matches(line))
    })
  }

  /** The first line it printed that matches (waiting for it). */
  private line(matches: (line: string) => boolean): Promise<string> {
    const printed = this.lines.find(matches)
    if (printed !== undefined) return Promise.resolve(printed)
    return new Promise((resolve) => this.waiting.push({ matches, resolve }))
  }

  static start(mode: "garbage" | "waits" | "echo"): Stranger {
    const source = fs.readFileSync(new URL("./fixtures/stranger.mjs", import.meta.url), "utf8")
    const stranger = new Stranger(spawn(process.execPath, ["--input-type=module", "-e", source, mode], { uid, gid, cwd: "/", stdio: ["pipe", "pipe", "inherit"] }))
    Stranger.started.add(stranger)
    return stranger
  }

  /** Every stranger still running, a test's that timed out included. */
  static async stopAll(): Promise<void> {
    await Promise.all([...Stranger.started].map((s) => s.stop()))
  }

  /** Connects to 127.0.0.1:`port`; resolves with the connection's id once it is up (and its bytes sent). */
  async connect(port: number): Promise<number> {
    const id = this.nextId++
    this.child.stdin!.write(`${id} ${port}\n`)
    if ((await this.line((l) => l === `connected ${id}` || l === `closed ${id}`)) !== `connected ${id}`) {
      throw new Error(`the stranger could not connect to port ${port}`)
    }
    return id
  }

  /** Resolves once the connection `id` was closed by the other end. */
  async closed(id: number): Promise<void> {
    await this.line((l) => l === `closed ${id}`)
  }

  /** Whether every one of the connections `ids` was closed within `ms`. */
  closedWithin(ids: ReadonlyArray<number>, ms: number): Promise<boolean> {
    return Promise.race([Promise.all(ids.map((id) => this.closed(id))).then(() => true), sleep(ms).then(() => false)])
  }

  /** The port the echo stranger listens on. */
  async echoPort(): Promise<number> {
    return Number((await this.line((l) => l.startsWith("listening "))).split(" ")[1])
  }

  /** Ends the process (the user can only be removed once none of its processes runs). */
  async stop(): Promise<void> {
    Stranger.started.delete(this)
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise((resolve) => this.child.once("exit", resolve))
    this.child.kill("SIGKILL")
    await exited
  }
}

/** The platform package that users install (packages/platforms/gloo-linux-x64-gnu, filled by the repository's build). */
const GLOO_PLATFORM = fileURLToPath(new URL("../packages/platforms/gloo-linux-x64-gnu/", import.meta.url))

/**
 * Runs `body` with a stranger and two gloo ranks in child processes (the addon alone: the platform
 * package's, with its own libgloo, whose imports the pair guard redirects), and ends them all after.
 */
const withStranger = async (mode: "garbage" | "waits" | "echo", body: (stranger: Stranger, peers: ReadonlyArray<Peer>) => Promise<void>) => {
  const stranger = Stranger.start(mode)
  const peers = await Promise.all([Peer.spawn(), Peer.spawn()])
  try {
    const origin = { addon: join(GLOO_PLATFORM, "tensorlane_gloo.node"), libgloo: join(GLOO_PLATFORM, "lib", "libgloo.so.0") }
    expect(await Promise.all(peers.map((p) => p.call("origin")))).toEqual([origin, origin])
    await body(stranger, peers)
  } finally {
    for (const p of peers) p.kill()
    await stranger.stop()
  }
}

const CREATIONS = 20

describe.each([
  ["sends garbage", "garbage"],
  ["connects and waits", "waits"],
] as const)("gloo, while a stranger that %s, at every listening port of both ranks", (_what, mode) => {
  it(`all ${CREATIONS} group creations connect and carry their bytes, and every stranger's connection is closed`, () =>
    withStranger(mode, async (stranger, peers) => {
      let connected = 0
      let dropped = 0
      const failures = new Set<string>()
      for (let i = 0; i < CREATIONS; i++) {
        const blobs = await Promise.all(peers.map((p, rank) => p.call<Uint8Array>("create", { rank, size: 2, timeoutMs: 2000 })))
        // Each rank's pair listens on a port of its own until its peer connects: the stranger comes first.
        const ports = peers.flatMap((p) => listeningSockets(p.child.pid!).map((s) => s.port))
        expect(ports).toHaveLength(2)
        const ids = await Promise.all(ports.map((port) => stranger.connect(port)))
        const outcome = await Promise.all(peers.map((p) => p.call("connect", { blobs }))).then(
          () => "connected",
          (error: { message: string }) => error.message,
        )
        if (outcome === "connected") {
          const name = `t${i}`
          await peers[0].call("alloc", { name, bytes: 4096, seed: i + 1 })
          await peers[1].call("alloc", { name: `${name}/in`, bytes: 4096 })
          await Promise.all([
            peers[0].call("send", { peer: 1, objectId: name, names: [name] }),
            peers[1].call("receive", { peer: 0, objectId: name, names: [`${name}/in`] }),
          ])
          expect(await peers[1].call("digest", { name: `${name}/in` })).toBe(await peers[0].call("digest", { name }))
          connected++
        } else {
          failures.add(outcome)
        }
        if (await stranger.closedWithin(ids, 1000)) dropped++
        expect(peers.flatMap((p) => listeningSockets(p.child.pid!))).toEqual([])
        await Promise.all(peers.map((p) => p.call("destroy")))
      }
      expect({ connected, dropped, failures: [...failures] }).toEqual({ connected: CREATIONS, dropped: CREATIONS, failures: [] })
    }))
})

describe("gloo, when the peer never comes", () => {
  it("the listening rank closes a stranger that waits, and fails at the connect timeout instead of taking it for its peer", () =>
    withStranger("waits", async (stranger, peers) => {
      // A connect timeout of 200 ms: gloo, and the guard, wait five times that for a peer.
      const blobs = await Promise.all(peers.map((p, rank) => p.call<Uint8Array>("create", { rank, size: 2, timeoutMs: 200 })))
      const ports = peers.map((p) => listeningSockets(p.child.pid!)[0].port)
      const listener = glooOrder(ports[0]) < glooOrder(ports[1]) ? 0 : 1
      const id = await stranger.connect(ports[listener])
      const started = Date.now()
      const failure = await failureOf(peers[listener].call("connect", { blobs }))
      expect(failure.code).toBe("timeout")
      expect(failure.message).toMatch(/rank \d did not connect and prove the group's secret within the connect timeout; 1 other connections to the pair's port were closed/)
      expect(Date.now() - started).toBeLessThan(5_000)
      await stranger.closed(id)
    }))
})

describe("gloo, against a stranger that took the peer's port", () => {
  it("the connecting rank refuses it, even when it echoes the rank's own proof back", () =>
    withStranger("echo", async (stranger, peers) => {
      const fake = await stranger.echoPort()
      const blobs = await Promise.all(peers.map((p, rank) => p.call<Uint8Array>("create", { rank, size: 2, timeoutMs: 2000 })))
      // Rank 0's address for rank 1 now names the stranger's port, which sorts below rank 1's own:
      // rank 1 makes the connection (gloo's rule).
      const forged = blobs[0].slice()
      portAt(forged).setUint16(0, fake)
      expect(glooOrder(fake)).toBeLessThan(glooOrder(portAt(blobs[1]).getUint16(0)))
      const failure = await failureOf(peers[1].call("connect", { blobs: [forged, blobs[1]] }))
      expect(failure.code).toBe("protocol")
      expect(failure.message).toMatch(/the process listening for rank 0 did not prove the group's secret/)
    }))
})

describe("NIXL", () => {
  it("listens on loopback only in every process that used it", async () => {
    await using cluster = await start({ transports: ["@tensorlane/transport-nixl"] })
    const [producer, consumer] = await cluster.spawn(NixlWorker, { count: 2 })
    const tensor = producer.randomTensor()
    // The consumer and the driver both READ from the producer.
    const sums = [await cluster.get(producer.sum(tensor)), await cluster.get(consumer.sum(tensor))]
    expect(sums[1]).toBe(sums[0])
    expect(((await cluster.get(tensor)) as { numel: number }).numel).toBe(1_000_000)
    tensor.release()
    const pids = [(await cluster.get(producer.pid())) as number, (await cluster.get(consumer.pid())) as number]
    for (const pid of [...pids, process.pid]) {
      const sockets = listeningSockets(pid)
      expect(sockets.length, `process ${pid} listens for UCX`).toBeGreaterThan(0)
      expect(sockets.filter((s) => !isLoopback(s.address)), `process ${pid}`).toEqual([])
    }
  })
})
