/**
 * The multi-host harness itself: hosts that reach one another and the driver over the bridge and
 * have their own /dev/shm and /tmp, a link taken down and up, a host killed, Postgres that lets in
 * only the cluster's role over TLS with SCRAM and stops and starts, and a teardown that leaves no
 * namespace, veth, process or folder, whether the harness is torn down, its body fails, or the
 * process that made it is killed.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Harness, harnessUnavailable, startHosts, withHosts } from "./harness.ts"
import { alive } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host harness tests: ${unavailable}`)

const HOLDER = fileURLToPath(new URL("fixtures/holdHosts.ts", import.meta.url))

/** A node one-liner that serves lines back with the serving host's name, on `address`:`port`. */
const echoServer = (address: string, port: number, name: string) =>
  ["node", "-e", `require("net").createServer((s) => s.on("data", (d) => s.end("${name}:" + d))).listen(${port}, "${address}", () => console.log("listening"))`]

/** What `echoServer` at `address`:`port` answers to "ping", from host `from` (or the driver when undefined); "" when it cannot connect within 1 s. */
const ping = async (env: Harness, from: string | undefined, address: string, port: number): Promise<string> => {
  const script = `const s = require("net").connect(${port}, "${address}"); s.setTimeout(1000, () => process.exit(3)); s.on("error", () => process.exit(4)); s.on("data", (d) => { process.stdout.write(String(d)); process.exit(0) }); s.write("ping")`
  if (from !== undefined) return (await env.run(from, ["node", "-e", script], { timeoutMs: 5_000 })).stdout
  return new Promise((resolve) => {
    const socket = net.connect(port, address)
    socket.setTimeout(1000, () => socket.destroy())
    socket.on("error", () => undefined)
    let answer = ""
    socket.on("data", (d) => (answer += d))
    socket.on("close", () => resolve(answer))
    socket.write("ping")
  })
}

const started = (child: ChildProcess): Promise<void> =>
  new Promise((resolve, reject) => {
    child.stdout!.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`exited with ${code} before it listened`)))
  })

/** What is left of harness `id`: its namespaces, the driver's veth, its folder, and which of `pids` still run. */
const leftovers = (id: string, folder: string, pids: ReadonlyArray<number> = []) => ({
  namespaces: execFileSync("ip", ["netns", "list"], { encoding: "utf8" }).split("\n").filter((line) => line.startsWith(`tl-${id}-`)),
  links: execFileSync("ip", ["-o", "link"], { encoding: "utf8" }).split("\n").filter((line) => line.includes(`tl-${id}-`)),
  folder: fs.existsSync(folder),
  processes: pids.filter(alive),
})
const NOTHING = { namespaces: [], links: [], folder: false, processes: [] }

describe.skipIf(unavailable !== undefined)("the multi-host harness", () => {
  let env: Harness
  beforeAll(async () => {
    env = await startHosts({ hosts: 3, strangers: 1 })
  }, 60_000)
  afterAll(async () => {
    const { id, folder } = env
    await env.teardown()
    expect(leftovers(id, folder)).toEqual(NOTHING)
  })

  it("joins the hosts, a stranger and the driver on one private network", async () => {
    expect(env.hosts.map((h) => h.name)).toEqual(["h1", "h2", "h3"])
    expect(env.config.hosts.map((h) => h.address)).toEqual(env.hosts.map((h) => h.address))
    const server = env.exec("h2", echoServer(env.hosts[1]!.address, 7501, "h2"))
    try {
      await started(server)
      expect(await ping(env, "h1", env.hosts[1]!.address, 7501)).toBe("h2:ping")
      expect(await ping(env, "h3", env.hosts[1]!.address, 7501)).toBe("h2:ping")
      expect(await ping(env, "s1", env.hosts[1]!.address, 7501)).toBe("h2:ping")
      expect(await ping(env, undefined, env.hosts[1]!.address, 7501)).toBe("h2:ping")
    } finally {
      server.kill("SIGKILL")
    }
    const addresses = await env.run("h1", ["ip", "-4", "-o", "addr", "show", "dev", "eth0"])
    expect(addresses.stdout).toContain(`${env.hosts[0]!.address}/24`)
  })

  it("gives each host its own /dev/shm and /tmp, shared by the processes of that host", async () => {
    const write = await env.run("h1", ["sh", "-c", "echo h1 > /dev/shm/tl-harness-probe && echo h1 > /tmp/tl-harness-probe"])
    expect(write.code).toBe(0)
    expect((await env.run("h1", ["cat", "/dev/shm/tl-harness-probe", "/tmp/tl-harness-probe"])).stdout).toBe("h1\nh1\n")
    expect((await env.run("h2", ["sh", "-c", "ls -A /dev/shm /tmp"])).stdout).not.toContain("tl-harness-probe")
    expect(fs.existsSync("/dev/shm/tl-harness-probe") || fs.existsSync("/tmp/tl-harness-probe")).toBe(false)
  })

  it("cuts a host off with linkDown and joins it again with linkUp", async () => {
    const server = env.exec("h3", echoServer(env.hosts[2]!.address, 7502, "h3"))
    try {
      await started(server)
      env.linkDown("h3")
      expect(await ping(env, "h1", env.hosts[2]!.address, 7502)).toBe("")
      env.linkUp("h3")
      const deadline = Date.now() + 5_000
      let answer = ""
      while (answer === "" && Date.now() < deadline) answer = await ping(env, "h1", env.hosts[2]!.address, 7502)
      expect(answer).toBe("h3:ping")
    } finally {
      server.kill("SIGKILL")
    }
  })

  it("kills every process of a host", async () => {
    const sleeper = env.exec("h2", ["sleep", "3600"], { stdio: "ignore" })
    const exited = new Promise((resolve) => sleeper.once("exit", (_code, signal) => resolve(signal)))
    await env.kill("h2")
    expect(await exited).toBe("SIGKILL")
    expect(execFileSync("ip", ["netns", "pids", env.hosts[1]!.namespace], { encoding: "utf8" })).toBe("")
  })

  describe("Postgres", () => {
    const psql = (from: string, options: { readonly ssl?: string; readonly password?: string; readonly database?: string }) =>
      env.run(
        from,
        [
          "psql",
          `host=${env.postgresAddress} port=5432 dbname=${options.database ?? "tensorlane"} user=tensorlane sslmode=${options.ssl ?? "verify-full"} sslrootcert=${env.config.postgres.caPath} connect_timeout=5`,
          "-X", "-A", "-t", "-c", "select current_user, ssl, version from pg_stat_ssl where pid = pg_backend_pid()",
        ],
        { env: { ...process.env, PGPASSWORD: options.password ?? env.config.postgres.password } },
      )

    it("lets the cluster's role in over TLS with its SCRAM password, listening only on its address", async () => {
      const ok = await psql("h2", {})
      expect(ok.stderr).toBe("")
      expect(ok.stdout).toBe("tensorlane|t|TLSv1.3\n")
      const listening = await env.run("pg", ["ss", "-ltnH"])
      expect(listening.stdout.trim().split("\n").map((line) => line.trim().split(/\s+/)[3])).toEqual([`${env.postgresAddress}:5432`])
    })

    it("refuses a connection without TLS, a wrong password and another database", async () => {
      expect((await psql("h1", { ssl: "disable" })).stderr).toMatch(/no pg_hba.conf entry .* no encryption/)
      expect((await psql("h1", { password: "not-the-password" })).stderr).toMatch(/password authentication failed for user "tensorlane"/)
      expect((await psql("h1", { database: "postgres" })).stderr).toMatch(/no pg_hba.conf entry .* database "postgres"/)
    })

    it("stops and starts again", async () => {
      await env.stopPostgres()
      expect((await psql("h3", {})).stderr).toMatch(/Connection refused/)
      await env.startPostgres()
      expect((await psql("h3", {})).stdout).toBe("tensorlane|t|TLSv1.3\n")
    })
  })
})

describe.skipIf(unavailable !== undefined)("the multi-host harness's teardown", () => {
  it("leaves nothing when the body fails", async () => {
    let made: { id: string; folder: string } | undefined
    const failure = await withHosts({ hosts: 1 }, async (env) => {
      made = { id: env.id, folder: env.folder }
      expect(leftovers(env.id, env.folder).namespaces).toHaveLength(3)
      throw new Error("the body failed")
    }).catch((error: Error) => error)
    expect(failure).toMatchObject({ message: "the body failed" })
    expect(leftovers(made!.id, made!.folder)).toEqual(NOTHING)
  })

  for (const signal of ["SIGKILL", "SIGTERM", "SIGINT"] as const) {
    it(`leaves nothing when the process that made it gets ${signal}`, async () => {
      const holder = spawn(process.execPath, ["--import", "tsx", HOLDER], { stdio: ["ignore", "pipe", "inherit"] })
      const line = await new Promise<string>((resolve, reject) => {
        let out = ""
        holder.stdout!.on("data", (d) => {
          out += d
          if (out.includes("\n")) resolve(out.split("\n")[0]!)
        })
        holder.once("exit", (code) => reject(new Error(`the holder exited with ${code}`)))
      })
      const { id, folder, pids } = JSON.parse(line) as { id: string; folder: string; pids: ReadonlyArray<number> }
      const before = leftovers(id, folder, pids)
      expect(before.namespaces).toHaveLength(4)
      expect(before.processes).toEqual(pids)
      holder.kill(signal)
      const deadline = Date.now() + 20_000
      while (JSON.stringify(leftovers(id, folder, pids)) !== JSON.stringify(NOTHING) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      expect(leftovers(id, folder, pids)).toEqual(NOTHING)
    })
  }
})
