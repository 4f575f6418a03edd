/**
 * `tensorlane cluster init` and core's cluster config: what init writes loads, every certificate and
 * key it writes works for mutual TLS, and a config, certificate or key that is missing, malformed,
 * of another cluster, outside its dates or of another member is refused with a typed error; doctor's
 * check that Postgres refuses the role without TLS never sends the role's password there.
 */
import { X509Certificate } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { type ClusterConfig, loadClusterConfig, tlsOptionsFor } from "@tensorlane/core"
import { checkPostgres } from "../src/ClusterDoctor.ts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { rejection, thrown } from "../../core/test/helpers/errors.ts"
import { type ClusterInitOptions, initCluster } from "../src/ClusterInit.ts"
import { UsageError } from "../src/Errors.ts"
import { tensorlane } from "./cli.ts"

const SERVER_AUTH = "1.3.6.1.5.5.7.3.1"
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2"

const options = (out: string, name = "lab"): ClusterInitOptions => ({
  out,
  name,
  hosts: [
    { name: "h1", address: "127.0.0.1", interface: "lo" },
    { name: "h2", address: "127.0.0.2", interface: "lo" },
  ],
  drivers: ["driver"],
  port: 7400,
  postgres: { host: "127.0.0.1", port: 5432, database: "tensorlane", user: "tensorlane" },
  days: 30,
})

let root: string
let lab: ClusterConfig
let other: ClusterConfig
beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), "tl-cluster-test-"))
  lab = await initCluster(options(path.join(root, "lab")))
  other = await initCluster(options(path.join(root, "other"), "other"))
})
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

/** A copy of the lab cluster's folder, changed by `edit`, whose cluster.json is returned. */
const variant = (edit: (dir: string, config: Record<string, any>) => void): string => {
  const dir = fs.mkdtempSync(path.join(root, "variant-"))
  fs.cpSync(path.join(root, "lab"), dir, { recursive: true })
  const file = path.join(dir, "cluster.json")
  const config = JSON.parse(fs.readFileSync(file, "utf8"))
  edit(dir, config)
  fs.writeFileSync(file, JSON.stringify(config))
  return file
}

/** A TLS server of `server` on 127.0.0.1 and a client of `client` to it; what each side saw. */
const handshake = async (
  server: tls.TlsOptions,
  client: tls.ConnectionOptions,
  authorize: (socket: tls.TLSSocket) => string,
): Promise<{ readonly peer: string | Error; readonly client: "connected" | Error }> => {
  let peer: string | Error = new Error("no connection")
  const listener = tls.createServer(server, (socket) => {
    try {
      peer = authorize(socket)
    } catch (error) {
      peer = error as Error
    }
    socket.end("ok")
  })
  listener.on("tlsClientError", (error) => {
    peer = error
  })
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
  const port = (listener.address() as { port: number }).port
  const result = await new Promise<"connected" | Error>((resolve) => {
    const socket = tls.connect({ ...client, host: "127.0.0.1", port }, () => {
      socket.once("data", () => {
        socket.end()
        resolve("connected")
      })
    })
    socket.on("error", resolve)
    socket.on("close", () => resolve(new Error("closed before data")))
  })
  await new Promise((resolve) => listener.close(resolve))
  return { peer, client: result }
}

describe("cluster init", () => {
  it("writes a config that loads, keys readable by their owner only", () => {
    expect(lab.name).toBe("lab")
    expect(lab.hosts.map((h) => [h.name, h.address, h.port, h.interface])).toEqual([
      ["h1", "127.0.0.1", 7400, "lo"],
      ["h2", "127.0.0.2", 7400, "lo"],
    ])
    expect(lab.drivers.map((d) => d.name)).toEqual(["driver"])
    expect(lab.postgres.password).toMatch(/^[A-Za-z0-9_-]{32}$/)
    const dir = path.join(root, "lab")
    const modes = Object.fromEntries(
      ["ca.key", "ca.pem", "hosts/h1.key", "hosts/h2.key", "drivers/driver.key", "postgres/server.key", "postgres/password", "hosts/h1.pem"].map((f) => [
        f,
        (fs.statSync(path.join(dir, f)).mode & 0o777).toString(8),
      ]),
    )
    expect(modes).toEqual({
      "ca.key": "600",
      "ca.pem": "644",
      "hosts/h1.key": "600",
      "hosts/h2.key": "600",
      "drivers/driver.key": "600",
      "postgres/server.key": "600",
      "postgres/password": "600",
      "hosts/h1.pem": "644",
    })
    const postgresCert = new X509Certificate(fs.readFileSync(path.join(dir, "postgres/server.pem")))
    expect(postgresCert.checkIP("127.0.0.1")).toBe("127.0.0.1")
    expect(postgresCert.checkIssued(new X509Certificate(lab.ca))).toBe(true)
    expect(postgresCert.keyUsage).toEqual([SERVER_AUTH])
    for (const member of ["hosts/h1.pem", "drivers/driver.pem"]) expect(new X509Certificate(fs.readFileSync(path.join(dir, member))).keyUsage).toEqual([SERVER_AUTH, CLIENT_AUTH])
  })

  it("issues the Postgres server a certificate that a member's TLS server refuses from a client", async () => {
    const dir = path.join(root, "lab")
    const host = tlsOptionsFor(lab, "h1")
    const asPostgres = { ...tlsOptionsFor(lab, "driver").client("h1"), cert: fs.readFileSync(path.join(dir, "postgres/server.pem"), "utf8"), key: fs.readFileSync(path.join(dir, "postgres/server.key"), "utf8") }
    // As the engine's runner server does: the handshake alone, no peerName.
    const tlsOnly = (socket: tls.TLSSocket) => (socket.authorized ? "authorized" : String(socket.authorizationError))
    expect((await handshake(host.server, asPostgres, tlsOnly)).client).toBeInstanceOf(Error)
    expect((await handshake({ ...host.server, rejectUnauthorized: false }, asPostgres, tlsOnly)).peer).toBe("INVALID_PURPOSE")
    expect(await handshake(host.server, tlsOptionsFor(lab, "driver").client("h1"), tlsOnly)).toEqual({ peer: "authorized", client: "connected" })
  })

  it("refuses a folder that is not empty, bad names and addresses, and repeated names, writing nothing", async () => {
    expect(await rejection(initCluster(options(path.join(root, "lab"))))).toBeInstanceOf(UsageError)
    const fresh = path.join(root, "fresh")
    for (const bad of [
      { ...options(fresh), hosts: [{ name: "H 1", address: "10.0.0.1", interface: "eth0" }] },
      { ...options(fresh), hosts: [{ name: "h1", address: "0.0.0.0", interface: "eth0" }] },
      { ...options(fresh), hosts: [{ name: "h1", address: "not-an-ip", interface: "eth0" }] },
      { ...options(fresh), drivers: ["h1"] },
      { ...options(fresh), drivers: ["head"], postgres: { ...options(fresh).postgres, host: "head" } },
      { ...options(fresh), hosts: [{ name: "h1", address: "::ffff:0.0.0.0", interface: "eth0" }] },
      { ...options(fresh), hosts: [{ name: "h1", address: "fe80::1%lo", interface: "eth0" }] },
      { ...options(fresh), postgres: { ...options(fresh).postgres, host: "db..lab" } },
      { ...options(fresh), postgres: { ...options(fresh).postgres, host: "10.0.0.1:abc" } },
      { ...options(fresh), postgres: { ...options(fresh).postgres, host: "fe80::1%lo" } },
      { ...options(fresh), port: 70000 },
      { ...options(fresh), port: 65535 },
      { ...options(fresh), days: 0 },
    ]) {
      expect(await rejection(initCluster(bad))).toBeInstanceOf(UsageError)
    }
    expect(fs.existsSync(fresh)).toBe(false)
  })

  it("makes, from the command line of docs/multi-host.md, the config that the guide shows", async () => {
    const guide = (name: string) => fs.readFileSync(new URL(`../../../docs/snippets/multi-host/${name}`, import.meta.url), "utf8")
    const line = guide("cluster-init.sh").replace(/\\\n\s*/g, "").trim().split(/\s+/)
    expect(line.slice(0, 2)).toEqual(["npx", "tensorlane"])
    const args = line.slice(2)
    const out = path.join(root, "guide")
    args[args.indexOf("--out") + 1] = out
    const run = await tensorlane(args)
    expect(run.stderr).toBe("")
    const written = JSON.parse(fs.readFileSync(path.join(out, "cluster.json"), "utf8"))
    const shown = JSON.parse(guide("cluster.json"))
    expect({ ...written, hosts: written.hosts.slice(0, shown.hosts.length) }).toEqual(shown)
  })

  it("runs from the command line", async () => {
    const out = path.join(root, "cli")
    const run = await tensorlane(["cluster", "init", "--hosts", "a=10.0.0.1@eth1,b=10.0.0.2", "--drivers", "d1,d2", "--out", out, "--name", "lab2"])
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    const config = loadClusterConfig(path.join(out, "cluster.json"))
    expect(config.hosts.map((h) => `${h.name}=${h.address}@${h.interface}`)).toEqual(["a=10.0.0.1@eth1", "b=10.0.0.2@eth0"])
    expect(config.drivers.map((d) => d.name)).toEqual(["d1", "d2"])
    expect(config.postgres).toMatchObject({ host: "10.0.0.1", port: 5432 })
    const bad = await tensorlane(["cluster", "init", "--hosts", "a", "--out", path.join(root, "cli2")])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/^UsageError: --hosts a: name=address/)
  })
})

describe("loadClusterConfig", () => {
  const expectError = (file: string, tag: string, message: RegExp) => {
    const error = thrown(() => loadClusterConfig(file))
    expect(error).toMatchObject({ _tag: tag })
    expect((error as Error).message).toMatch(message)
  }

  it("refuses a config that is missing, a folder, not JSON or not the Schema", () => {
    expectError(path.join(root, "nowhere.json"), "ClusterConfigError", /does not exist/)
    expectError(path.join(root, "lab"), "ClusterConfigError", /is not a file/)
    const notJson = path.join(root, "not.json")
    fs.writeFileSync(notJson, "{")
    expectError(notJson, "ClusterConfigError", /is not JSON/)
    expectError(variant((_, c) => (c.hosts[0].address = "0.0.0.0")), "ClusterConfigError", /0\.0\.0\.0/)
    expectError(variant((_, c) => (c.hosts[0].port = 0)), "ClusterConfigError", /invalid/)
    expectError(variant((_, c) => (c.hosts = [])), "ClusterConfigError", /invalid/)
    expectError(variant((_, c) => (c.extra = 1)), "ClusterConfigError", /invalid/)
    expectError(variant((_, c) => (c.drivers[0].name = "h2")), "ClusterConfigError", /h2 more than once/)
    expectError(variant((_, c) => (c.hosts[1].address = "127.0.0.1")), "ClusterConfigError", /more than one host/)
  })

  it("refuses a zoned address (fe80::1%lo) for a host, and a Postgres server that is neither a host name nor an address", () => {
    expectError(variant((_, c) => (c.hosts[0].address = "fe80::1%lo")), "ClusterConfigError", /without a zone/)
    for (const host of ["db..lab", "-db", "db_lab", "10.0.0.1:5432", "fe80::1%lo", "a".repeat(64)]) {
      expectError(variant((_, c) => (c.postgres.host = host)), "ClusterConfigError", /a host name .* or an IP address without a zone/)
    }
  })

  it("refuses a wildcard address in any spelling, IPv4-mapped included", () => {
    for (const wildcard of ["0.0.0.0", "::", "::0", "0::", "00::", "::0.0.0.0", "0000:0000::", "0:0:0:0:0:0:0:0", "::ffff:0.0.0.0", "::ffff:0:0"]) {
      expectError(variant((_, c) => (c.hosts[0].address = wildcard)), "ClusterConfigError", /other than 0\.0\.0\.0 and ::/)
    }
  })

  it("refuses two hosts on one address whose node or engine ports meet, in any spelling of the address, and a port without a next one", () => {
    expectError(variant((_, c) => (c.hosts[1].address = "::ffff:127.0.0.1")), "ClusterConfigError", /127\.0\.0\.1 port 7400, 127\.0\.0\.1 port 7401 to more than one host/)
    expectError(variant((_, c) => (c.hosts[1].address = "::FFFF:7f00:1")), "ClusterConfigError", /127\.0\.0\.1 port 7400/)
    expectError(variant((_, c) => Object.assign(c.hosts[1], { address: "127.0.0.1", port: 7401 })), "ClusterConfigError", /127\.0\.0\.1 port 7401 to more than one host/)
    expectError(variant((_, c) => Object.assign(c.hosts[1], { address: "127.0.0.1", port: 7399 })), "ClusterConfigError", /127\.0\.0\.1 port 7400 to more than one host/)
    expectError(variant((_, c) => (c.hosts[0].port = 65535)), "ClusterConfigError", /invalid/)
  })

  it("refuses a Postgres server named like a member", () => {
    for (const host of ["h1", "driver", "H2."]) expectError(variant((_, c) => (c.postgres.host = host)), "ClusterConfigError", /names its Postgres server .*, a member's name/)
  })

  it("refuses a missing password file or an empty password", () => {
    expectError(variant((dir) => fs.rmSync(path.join(dir, "postgres/password"))), "ClusterConfigError", /password file .* does not exist/)
    expectError(variant((dir) => fs.writeFileSync(path.join(dir, "postgres/password"), "\n")), "ClusterConfigError", /one non-empty line/)
  })

  it("refuses a password file that other users can read", () => {
    expectError(variant((dir) => fs.chmodSync(path.join(dir, "postgres/password"), 0o640)), "ClusterConfigError", /password file .* is readable by other users/)
  })

  it("refuses a certificate that is missing, malformed, of another cluster, of another member or expired", () => {
    expectError(variant((dir) => fs.rmSync(path.join(dir, "hosts/h2.pem"))), "CertificateError", /certificate of h2 .* does not exist/)
    expectError(variant((dir) => fs.writeFileSync(path.join(dir, "hosts/h2.pem"), "garbage")), "CertificateError", /not a PEM certificate/)
    expectError(variant((dir) => fs.copyFileSync(path.join(root, "other/hosts/h2.pem"), path.join(dir, "hosts/h2.pem"))), "CertificateError", /not signed by the cluster's CA/)
    expectError(variant((dir) => fs.copyFileSync(path.join(dir, "hosts/h1.pem"), path.join(dir, "hosts/h2.pem"))), "CertificateError", /does not name h2/)
    expectError(variant((_, c) => (c.hosts[1].address = "127.0.0.3")), "CertificateError", /does not name its address 127\.0\.0\.3/)
    expectError(variant((_, c) => (c.ca = "hosts/h1.pem")), "CertificateError", /is not a CA certificate/)
    const serverOnly = variant((_, c) => Object.assign(c.drivers[0], { cert: "postgres/server.pem", key: "postgres/server.key" }))
    expectError(serverOnly, "CertificateError", /not for both TLS servers and clients \(its extended key usages: 1\.3\.6\.1\.5\.5\.7\.3\.1\)/)
    const later = new Date(Date.now() + 31 * 86_400_000)
    expect(thrown(() => loadClusterConfig(lab.file, later))).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/expired at/) })
    const earlier = new Date(Date.now() - 86_400_000)
    expect(thrown(() => loadClusterConfig(lab.file, earlier))).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/valid only from/) })
  })
})

describe("tlsOptionsFor", () => {
  it("connects a driver to a host with mutual TLS; each side knows the other by its member name", async () => {
    const host = tlsOptionsFor(lab, "h1")
    const driver = tlsOptionsFor(lab, "driver")
    expect(await handshake(host.server, driver.client("h1"), host.peerName)).toEqual({ peer: "driver", client: "connected" })
    expect(await handshake(driver.server, tlsOptionsFor(lab, "h2").client("driver"), driver.peerName)).toEqual({ peer: "h2", client: "connected" })
  })

  it("refuses a client of another cluster, a client without a certificate, and a server that is not the peer asked for", async () => {
    const host = tlsOptionsFor(lab, "h1")
    const stranger = await handshake(host.server, tlsOptionsFor(other, "driver").client("h1"), host.peerName)
    expect(stranger.client).toBeInstanceOf(Error)
    expect(stranger.peer).toBeInstanceOf(Error)
    const { key: _key, cert: _cert, ...anonymous } = tlsOptionsFor(lab, "driver").client("h1")
    const bare = await handshake(host.server, anonymous, host.peerName)
    expect(bare.client).toBeInstanceOf(Error)
    const wrong = await handshake(host.server, tlsOptionsFor(lab, "driver").client("h2"), host.peerName)
    expect(wrong.client).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/does not name h2/) })
  })

  it("refuses an unknown identity and a key that is missing, readable by others or of another member", () => {
    expect(thrown(() => tlsOptionsFor(lab, "h9"))).toMatchObject({ _tag: "CertificateError", identity: "h9" })
    const edited = (edit: (dir: string) => void) => loadClusterConfig(variant(edit))
    const missing = edited((dir) => fs.rmSync(path.join(dir, "hosts/h1.key")))
    expect(thrown(() => tlsOptionsFor(missing, "h1"))).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/does not exist/) })
    const open = edited((dir) => fs.chmodSync(path.join(dir, "hosts/h1.key"), 0o644))
    expect(thrown(() => tlsOptionsFor(open, "h1"))).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/readable by other users/) })
    const swapped = edited((dir) => fs.copyFileSync(path.join(dir, "hosts/h2.key"), path.join(dir, "hosts/h1.key")))
    expect(thrown(() => tlsOptionsFor(swapped, "h1"))).toMatchObject({ _tag: "CertificateError", message: expect.stringMatching(/not the key of the certificate/) })
  })
})

/**
 * A Postgres server on 127.0.0.1 without TLS: it refuses every connection outright (`no-hba`, as
 * without a pg_hba.conf line for it), or asks for the password in clear text and refuses it
 * (`cleartext`), recording the passwords it was sent.
 */
const plainPostgres = async (answer: "no-hba" | "cleartext") => {
  const passwords: Array<string> = []
  const error = (code: string, message: string) => {
    const fields = Buffer.from(`SFATAL\0C${code}\0M${message}\0\0`)
    const head = Buffer.alloc(5)
    head.write("E")
    head.writeInt32BE(4 + fields.length, 1)
    return Buffer.concat([head, fields])
  }
  const server = net.createServer((socket) => {
    let buffer = Buffer.alloc(0)
    let started = false
    socket.on("error", () => undefined)
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      while (!socket.destroyed) {
        // Before startup a message is its length and a code; after it, a type byte and its length.
        const at = started ? 1 : 0
        if (buffer.length < at + 4 || buffer.length < at + buffer.readInt32BE(at)) return
        const message = buffer.subarray(0, at + buffer.readInt32BE(at))
        buffer = buffer.subarray(message.length)
        if (!started && message.readInt32BE(4) === 80877103) socket.end("N")
        else if (!started && answer === "no-hba") socket.end(error("28000", "no pg_hba.conf entry"))
        else if (!started) {
          started = true
          socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]))
        } else if (message[0] === 0x70) {
          passwords.push(message.subarray(5, message.length - 1).toString())
          socket.end(error("28P01", "password authentication failed"))
        }
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { port: (server.address() as net.AddressInfo).port, passwords, close: () => new Promise((resolve) => server.close(resolve)) }
}

describe("doctor --cluster's Postgres check", () => {
  it("never sends the role's password without TLS, and counts the role refused only before any password", async () => {
    const cleartext = await plainPostgres("cleartext")
    try {
      const report = await checkPostgres({ ...lab, postgres: { ...lab.postgres, port: cleartext.port } })
      expect(cleartext.passwords.length).toBeGreaterThan(0)
      expect(cleartext.passwords).not.toContain(lab.postgres.password)
      expect(report).toMatchObject({ ok: false, plainRefused: false })
    } finally {
      await cleartext.close()
    }
    const noHba = await plainPostgres("no-hba")
    try {
      expect(await checkPostgres({ ...lab, postgres: { ...lab.postgres, port: noHba.port } })).toMatchObject({ ok: false, plainRefused: true, problem: expect.stringMatching(/does not support TLS/) })
      expect(noHba.passwords).toEqual([])
    } finally {
      await noHba.close()
    }
  })
})

describe("tensorlane node", () => {
  /** A loopback port no one listens on (listened on, then closed). */
  const freePort = async (): Promise<number> => {
    const server = net.createServer()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const { port } = server.address() as net.AddressInfo
    await new Promise((resolve) => server.close(resolve))
    return port
  }

  it("names the port it cannot listen on, and the Postgres it cannot use, with what to do, and leaves its port free", async () => {
    const holder = net.createServer()
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve))
    const held = (holder.address() as net.AddressInfo).port
    try {
      const taken = variant((_, config) => {
        config.hosts[0].port = held
      })
      expect(await tensorlane(["node", "--config", taken, "--name", "h1"])).toEqual({
        code: 1,
        stdout: "",
        stderr: `NodeStartError: node h1 cannot listen on 127.0.0.1:${held}: listen EADDRINUSE: address already in use 127.0.0.1:${held}; another process listens there (this host's node, already running?): stop it, or give the host another port in ${taken}\n`,
      })
    } finally {
      await new Promise((resolve) => holder.close(resolve))
    }
    const port = await freePort()
    // Nothing listens on port 1.
    const noPostgres = variant((_, config) => {
      config.hosts[0].port = port
      config.postgres.port = 1
    })
    const run = await tensorlane(["node", "--config", noPostgres, "--name", "h1"])
    expect(run).toMatchObject({ code: 1, stdout: "" })
    expect(run.stderr).toBe(
      "NodeStartError: node h1 cannot use the cluster's Postgres at 127.0.0.1:1 (database tensorlane as tensorlane): PgConnection: Failed to connect " +
        "(connect ECONNREFUSED 127.0.0.1:1); start it, or make it reachable from this host, then start the node again " +
        `(\`npx -p @tensorlane/cli tensorlane doctor --cluster ${noPostgres}\` checks the connection, its TLS and the role)\n`,
    )
    // The node closed its own port before it exited.
    const again = net.createServer()
    await new Promise<void>((resolve, reject) => again.once("error", reject).listen(port, "127.0.0.1", resolve))
    await new Promise((resolve) => again.close(resolve))
  })
})
