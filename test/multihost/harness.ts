/**
 * Hosts as Linux network namespaces, for the tests of clusters across hosts (root only).
 *
 * Harness `id` (6 hex digits) makes namespaces `tl-<id>-h1` ... (hosts, with the certificates of
 * `tensorlane cluster init`), `tl-<id>-s1` ... (strangers: on the network, without credentials),
 * `tl-<id>-pg` (Postgres) and `tl-<id>-br`, which holds the bridge `br0` that joins them all. Each
 * has a veth `eth0` on a private /24 that the harness picks (10.64-254.x.0, one that no route or
 * address of the root namespace covers): Postgres .1, the driver .2, hosts .11 on, strangers .101
 * on. The driver is the test process itself, in the root namespace, with the veth `tl-<id>-d` into
 * the bridge: the one change to the root namespace's interfaces. Every process the harness starts
 * in a host has the host's own /dev/shm and /tmp (folders of the harness bound there in a mount
 * namespace of its own, with its own System V IPC), shared by all processes of that host.
 *
 * Postgres (the installed server, `initdb` into the harness folder) listens only on .1 with TLS
 * (a server certificate from the cluster's CA) and lets in one role, the cluster's, by SCRAM, to
 * the cluster's database, which it owns; nothing without TLS.
 *
 * Teardown is the job of reaper.mjs, started before anything is made, which removes it all when
 * `teardown()` is called or the test process ends in any way (SIGINT, SIGTERM, SIGKILL, a crash).
 */
import { type ChildProcess, type StdioOptions, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import type { Writable } from "node:stream"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type ClusterConfig, loadClusterConfig } from "@tensorlane/core"

const HERE = path.dirname(fileURLToPath(import.meta.url))
const REPO = path.resolve(HERE, "../..")
const CLI = path.join(REPO, "packages/cli/dist/main.js")
const REAPER = path.join(HERE, "reaper.mjs")
/** Outside /tmp, which each host has its own of. */
const FOLDER_BASE = "/var/tmp"
const POSTGRES_PORT = 5432
const NODE_PORT = 7400
const MAX_HOSTS = 89
const MAX_STRANGERS = 100

export interface HarnessOptions {
  /** Hosts h1 ... hN, members of the cluster (1 to 89). */
  readonly hosts: number
  /** Namespaces s1 ... sN on the same network, without the cluster's credentials. */
  readonly strangers?: number
  /** The cluster's drivers, each with a certificate; ["driver"] when not given. */
  readonly drivers?: ReadonlyArray<string>
}

export interface HarnessHost {
  readonly name: string
  readonly address: string
  readonly namespace: string
}

export interface ExecOptions {
  readonly env?: NodeJS.ProcessEnv
  readonly stdio?: StdioOptions
  /** A system user to run as instead of root. */
  readonly user?: string
}

export interface RunResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface Harness {
  readonly id: string
  readonly folder: string
  /** The /24 of the hosts, like "10.77.3.0/24". */
  readonly subnet: string
  readonly postgresAddress: string
  /** The driver's address (the veth tl-<id>-d of the root namespace). */
  readonly driverAddress: string
  readonly clusterFile: string
  readonly config: ClusterConfig
  readonly hosts: ReadonlyArray<HarnessHost>
  readonly strangers: ReadonlyArray<HarnessHost>
  /** Starts `argv` in host or stranger `name` (or "pg"), with that host's network, /dev/shm, /tmp and IPC. */
  readonly exec: (name: string, argv: ReadonlyArray<string>, options?: ExecOptions) => ChildProcess
  /** `exec` to the end, with its output; killed after `timeoutMs` (30 s when not given). */
  readonly run: (name: string, argv: ReadonlyArray<string>, options?: ExecOptions & { readonly input?: string; readonly timeoutMs?: number }) => Promise<RunResult>
  /** Takes the link to the bridge of a host, stranger, "pg" or "driver" (the test process's) down (its cable pulled) or up again. */
  readonly linkDown: (name: string) => void
  readonly linkUp: (name: string) => void
  /** SIGKILLs every process of the host (the machine dies), waiting until none is left. */
  readonly kill: (name: string) => Promise<void>
  /** Stops Postgres (fast shutdown) and starts it again, ready for connections when the promise resolves. */
  readonly stopPostgres: () => Promise<void>
  readonly startPostgres: () => Promise<void>
  /** Removes everything; rejects when something could not be removed. */
  readonly teardown: () => Promise<void>
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** `promise`'s value, or `fallback` once `ms` passed first (its timer cleared either way). */
const within = async <A, B>(promise: Promise<A>, ms: number, fallback: B): Promise<A | B> => {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<B>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)))])
  } finally {
    clearTimeout(timer)
  }
}

const ip = (...args: ReadonlyArray<string>): string => execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** The folder of the installed Postgres server's programs (the highest version of Debian's postgresql packages). */
const postgresBin = (): string | undefined => {
  const versions = fs.existsSync("/usr/lib/postgresql")
    ? fs.readdirSync("/usr/lib/postgresql").filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))
    : []
  return versions.map((v) => `/usr/lib/postgresql/${v}/bin`).find((bin) => fs.existsSync(path.join(bin, "initdb")) && fs.existsSync(path.join(bin, "postgres")))
}

const which = (program: string): boolean => {
  try {
    execFileSync("sh", ["-c", `command -v ${program}`], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** Why the harness cannot run here, or undefined when it can (root, iproute2, namespaces, Postgres, the built command). */
export const harnessUnavailable = (): string | undefined => {
  if (process.getuid?.() !== 0) return "the multi-host harness needs root (network and mount namespaces)"
  for (const program of ["ip", "unshare", "setpriv"]) if (!which(program)) return `the multi-host harness needs ${program} (bash tools/setup.sh installs iproute2)`
  if (postgresBin() === undefined) return "the multi-host harness needs Debian's postgresql (bash tools/setup.sh installs it)"
  if (!fs.existsSync(CLI)) return `the multi-host harness needs the built command ${CLI} (npm run build)`
  const probe = `tl-probe-${randomBytes(3).toString("hex")}`
  try {
    ip("netns", "add", probe)
  } catch (error) {
    return `network namespaces cannot be made here (${String((error as { stderr?: string }).stderr ?? error).trim()})`
  }
  ip("netns", "delete", probe)
  return undefined
}

type Prefix = readonly [number, number]
const toNumber = (address: string): number => address.split(".").reduce((n, part) => n * 256 + Number(part), 0)
const overlaps = ([a, al]: Prefix, [b, bl]: Prefix): boolean => {
  const length = Math.min(al, bl)
  const mask = length === 0 ? 0 : (0xffffffff << (32 - length)) >>> 0
  return ((a & mask) >>> 0) === ((b & mask) >>> 0)
}

/** A 10.x.y.0/24 that no address or route of the root namespace covers or falls in. */
const pickSubnet = (): string => {
  const used: ReadonlyArray<Prefix> = [...`${ip("-4", "-o", "addr")}\n${ip("-4", "route", "show", "table", "all")}`.matchAll(/(\d+\.\d+\.\d+\.\d+)(?:\/(\d+))?/g)].map(
    (m) => [toNumber(m[1]!), m[2] === undefined ? 32 : Number(m[2])] as const,
  )
  for (let attempt = 0; attempt < 100; attempt++) {
    const [x, y] = [64 + (randomBytes(1)[0]! % 191), randomBytes(1)[0]!]
    const candidate: Prefix = [toNumber(`10.${x}.${y}.0`), 24]
    if (!used.some((prefix) => overlaps(prefix, candidate))) return `10.${x}.${y}`
  }
  throw new Error("the multi-host harness found no free 10.x.y.0/24 in 100 tries")
}

// Binds the host's folders over /dev/shm and /tmp; paths under /tmp that the host must still see
// (the repository, node) are bound into its /tmp first. Arguments: shm tmp keep... -- argv...
const HOST_SHELL = [
  'shm=$1; tmp=$2; shift 2',
  'while [ "$1" != -- ]; do d="$tmp${1#/tmp}"; mkdir -p "$d" && mount --bind "$1" "$d" || exit 125; shift; done; shift',
  'mount --bind "$shm" /dev/shm && mount --rbind "$tmp" /tmp && exec "$@"',
].join("\n")

const KEEP = [...new Set([REPO, path.dirname(process.execPath)])].filter((p) => p.startsWith("/tmp/"))

/** Makes the hosts, the network, the cluster's certificates and Postgres; tears down what it made when a step fails. */
export const startHosts = async (options: HarnessOptions): Promise<Harness> => {
  if (!Number.isInteger(options.hosts) || options.hosts < 1 || options.hosts > MAX_HOSTS) throw new Error(`hosts: 1 to ${MAX_HOSTS}, got ${options.hosts}`)
  const strangerCount = options.strangers ?? 0
  if (!Number.isInteger(strangerCount) || strangerCount < 0 || strangerCount > MAX_STRANGERS) throw new Error(`strangers: 0 to ${MAX_STRANGERS}, got ${strangerCount}`)
  const id = randomBytes(3).toString("hex")
  const folder = path.join(FOLDER_BASE, `tl-${id}`)
  const reaper = spawn(process.execPath, [REAPER, id, folder], { detached: true, stdio: ["pipe", "ignore", "inherit"] })
  reaper.unref()
  ;(reaper.stdin as Writable & { unref?: () => void }).unref?.()
  const reaped = new Promise<number | null>((resolve) => reaper.once("exit", resolve))
  const teardown = async (): Promise<void> => {
    reaper.stdin!.end()
    const code = await within(reaped, 30_000, "timeout")
    if (code !== 0) throw new Error(`the multi-host harness ${id} was not torn down cleanly (reaper: ${code}); see its message above`)
  }
  try {
    return await build(id, folder, options.hosts, strangerCount, options.drivers ?? ["driver"], teardown)
  } catch (error) {
    await teardown().catch(() => undefined)
    throw error
  }
}

const build = async (
  id: string,
  folder: string,
  hostCount: number,
  strangerCount: number,
  drivers: ReadonlyArray<string>,
  teardown: () => Promise<void>,
): Promise<Harness> => {
  fs.mkdirSync(folder, { mode: 0o755 })
  const net = pickSubnet()
  const ns = (name: string) => `tl-${id}-${name}`
  const member = (name: string, last: number): HarnessHost => ({ name, address: `${net}.${last}`, namespace: ns(name) })
  const hosts = Array.from({ length: hostCount }, (_, i) => member(`h${i + 1}`, 11 + i))
  const strangers = Array.from({ length: strangerCount }, (_, i) => member(`s${i + 1}`, 101 + i))
  const postgres = member("pg", 1)
  const everyone = [postgres, ...hosts, ...strangers]
  const bridge = ns("br")
  ip("netns", "add", bridge)
  ip("-n", bridge, "link", "add", "br0", "type", "bridge")
  ip("-n", bridge, "link", "set", "br0", "up")
  for (const m of everyone) {
    ip("netns", "add", m.namespace)
    ip("-n", bridge, "link", "add", m.name, "type", "veth", "peer", "name", "eth0", "netns", m.namespace)
    ip("-n", bridge, "link", "set", "dev", m.name, "master", "br0", "up")
    ip("-n", m.namespace, "addr", "add", `${m.address}/24`, "dev", "eth0")
    ip("-n", m.namespace, "link", "set", "eth0", "up")
    ip("-n", m.namespace, "link", "set", "lo", "up")
    for (const sub of ["shm", "tmp"]) fs.mkdirSync(path.join(folder, "hosts", m.name, sub), { recursive: true, mode: 0o1777 })
  }
  const driverLink = `tl-${id}-d`
  ip("link", "add", driverLink, "type", "veth", "peer", "name", "d", "netns", bridge)
  ip("-n", bridge, "link", "set", "dev", "d", "master", "br0", "up")
  const driverAddress = `${net}.2`
  ip("addr", "add", `${driverAddress}/24`, "dev", driverLink)
  ip("link", "set", driverLink, "up")

  const clusterDir = path.join(folder, "cluster")
  execFileSync(process.execPath, [CLI, "cluster", "init", "--name", `tl-${id}`, "--hosts", hosts.map((h) => `${h.name}=${h.address}@eth0`).join(","),
    "--drivers", drivers.join(","), "--postgres", `${postgres.address}:${POSTGRES_PORT}`, "--port", String(NODE_PORT), "--days", "365", "--out", clusterDir], { stdio: "pipe" })
  const clusterFile = path.join(clusterDir, "cluster.json")
  const config = loadClusterConfig(clusterFile)

  const known = new Map(everyone.map((m) => [m.name, m]))
  const host = (name: string): HarnessHost => {
    const found = known.get(name)
    if (found === undefined) throw new Error(`the multi-host harness ${id} has no host ${name} (it has ${[...known.keys()].join(", ")})`)
    return found
  }
  /** The bridge's end of a member's veth: its name, or "d" for the driver's. */
  const bridgePort = (name: string): string => (name === "driver" ? "d" : host(name).name)
  const exec = (name: string, argv: ReadonlyArray<string>, options: ExecOptions = {}): ChildProcess => {
    const m = host(name)
    const own = path.join(folder, "hosts", m.name)
    const as = options.user === undefined ? [] : ["setpriv", `--reuid=${options.user}`, `--regid=${options.user}`, "--init-groups", "--"]
    return spawn(
      "ip",
      ["netns", "exec", m.namespace, "unshare", "--mount", "--ipc", "--propagation", "private", "--", "sh", "-c", HOST_SHELL, `tl-${m.name}`,
        path.join(own, "shm"), path.join(own, "tmp"), ...KEEP, "--", ...as, ...argv],
      { env: options.env ?? process.env, stdio: options.stdio ?? "pipe" },
    )
  }
  const run: Harness["run"] = (name, argv, options = {}) =>
    new Promise((resolve, reject) => {
      const child = exec(name, argv, { ...options, stdio: ["pipe", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000)
      child.on("error", reject)
      child.on("close", (code, signal) => {
        clearTimeout(timer)
        resolve({ code, signal, stdout, stderr })
      })
      child.stdin!.on("error", () => undefined)
      child.stdin!.end(options.input ?? "")
    })
  const pids = (m: HarnessHost): ReadonlyArray<number> => ip("netns", "pids", m.namespace).split("\n").filter((p) => /^\d+$/.test(p)).map(Number)
  const kill = async (name: string): Promise<void> => {
    const m = host(name)
    for (let left = pids(m), deadline = Date.now() + 10_000; left.length > 0; left = pids(m)) {
      if (Date.now() > deadline) throw new Error(`processes ${left.join(", ")} of ${name} outlived SIGKILL`)
      for (const pid of left) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // Gone between the listing and the kill.
        }
      }
      await sleep(20)
    }
  }

  const pg = await preparePostgres(folder, postgres, net, config, run)
  let server: ChildProcess | undefined
  const startPostgres = async (): Promise<void> => {
    if (server !== undefined) throw new Error("Postgres is already running")
    const log = fs.openSync(path.join(folder, "postgres", "log"), "a")
    server = exec("pg", [path.join(pg.bin, "postgres"), "-D", pg.data, ...pg.settings], { user: "postgres", stdio: ["ignore", log, log] })
    fs.closeSync(log)
    const started = server
    const exited = new Promise<void>((resolve) => started.once("exit", () => resolve()))
    for (const deadline = Date.now() + 30_000; ; ) {
      const ready = await run("pg", [path.join(pg.bin, "pg_isready"), "-q", "-h", pg.sockets, "-p", String(POSTGRES_PORT)], { user: "postgres" })
      if (ready.code === 0) return
      const gone = await within(exited.then(() => true), 50, false)
      if (gone || Date.now() > deadline) {
        server = undefined
        throw new Error(`Postgres did not start: ${fs.readFileSync(path.join(folder, "postgres", "log"), "utf8").slice(-2000)}`)
      }
    }
  }
  const stopPostgres = async (): Promise<void> => {
    const running = server
    if (running === undefined) throw new Error("Postgres is not running")
    const exited = new Promise<void>((resolve) => running.once("exit", () => resolve()))
    running.kill("SIGINT")
    if (!(await within(exited.then(() => true), 20_000, false))) running.kill("SIGKILL")
    await exited
    server = undefined
  }
  await startPostgres()
  await createRole(pg, config, run)

  return {
    id,
    folder,
    subnet: `${net}.0/24`,
    postgresAddress: postgres.address,
    driverAddress,
    clusterFile,
    config,
    hosts,
    strangers,
    exec,
    run,
    linkDown: (name) => void ip("-n", bridge, "link", "set", "dev", bridgePort(name), "down"),
    linkUp: (name) => void ip("-n", bridge, "link", "set", "dev", bridgePort(name), "up"),
    kill,
    stopPostgres,
    startPostgres,
    teardown,
  }
}

interface PreparedPostgres {
  readonly bin: string
  readonly data: string
  readonly sockets: string
  readonly settings: ReadonlyArray<string>
}

/** initdb into the harness folder, the server certificate of `cluster init`, and a pg_hba.conf that lets in only the cluster's role, by TLS and SCRAM. */
const preparePostgres = async (
  folder: string,
  postgres: HarnessHost,
  net: string,
  config: ClusterConfig,
  run: Harness["run"],
): Promise<PreparedPostgres> => {
  const bin = postgresBin()
  if (bin === undefined) throw new Error("Postgres is not installed (bash tools/setup.sh installs it)")
  const base = path.join(folder, "postgres")
  const data = path.join(base, "data")
  const sockets = path.join(base, "sockets")
  fs.mkdirSync(sockets, { recursive: true, mode: 0o700 })
  const { uid, gid } = postgresUser()
  fs.chownSync(base, uid, gid)
  fs.chownSync(sockets, uid, gid)
  fs.chmodSync(base, 0o700)
  const init = await run("pg", [path.join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth-local=peer", "--auth-host=reject", "--no-sync", "--no-locale", "-E", "UTF8", "--no-instructions"], { user: "postgres", timeoutMs: 60_000 })
  if (init.code !== 0) throw new Error(`initdb failed: ${init.stderr}`)
  const clusterDir = path.dirname(config.file)
  for (const [from, to] of [["postgres/server.pem", "server.pem"], ["postgres/server.key", "server.key"]] as const) {
    fs.copyFileSync(path.join(clusterDir, from), path.join(data, to))
    fs.chownSync(path.join(data, to), uid, gid)
    fs.chmodSync(path.join(data, to), 0o600)
  }
  const { database, user } = config.postgres
  fs.writeFileSync(path.join(data, "pg_hba.conf"), `local all postgres peer\nhostssl ${database} ${user} ${net}.0/24 scram-sha-256\n`)
  const settings = {
    listen_addresses: postgres.address,
    port: String(POSTGRES_PORT),
    unix_socket_directories: sockets,
    ssl: "on",
    ssl_cert_file: path.join(data, "server.pem"),
    ssl_key_file: path.join(data, "server.key"),
    ssl_min_protocol_version: "TLSv1.3",
    password_encryption: "scram-sha-256",
    max_connections: "200",
    shared_buffers: "32MB",
    // A test's database is thrown away: no waiting for the disk.
    fsync: "off",
    synchronous_commit: "off",
    full_page_writes: "off",
  }
  return { bin, data, sockets, settings: Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]) }
}

const postgresUser = (): { readonly uid: number; readonly gid: number } => {
  let entry: ReadonlyArray<string>
  try {
    entry = execFileSync("getent", ["passwd", "postgres"], { encoding: "utf8" }).split(":")
  } catch {
    throw new Error("the system user postgres (of Debian's postgresql package) is missing")
  }
  return { uid: Number(entry[2]), gid: Number(entry[3]) }
}

/** The cluster's role with its SCRAM password, owning the cluster's database and nothing else; no one else may connect to the others. */
const createRole = async (pg: PreparedPostgres, config: ClusterConfig, run: Harness["run"]): Promise<void> => {
  const { database, user, password } = config.postgres
  if (!/^[A-Za-z0-9_-]+$/.test(password)) throw new Error("the cluster's Postgres password is not the base64url text cluster init writes")
  const sql = [
    `CREATE ROLE ${user} LOGIN PASSWORD '${password}';`,
    `CREATE DATABASE ${database} OWNER ${user};`,
    "REVOKE ALL ON DATABASE postgres FROM PUBLIC;",
    "REVOKE ALL ON DATABASE template1 FROM PUBLIC;",
  ].join("\n")
  const result = await run("pg", [path.join(pg.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", pg.sockets, "-p", String(POSTGRES_PORT), "-U", "postgres", "-d", "postgres", "-f", "-"], {
    user: "postgres",
    input: sql,
  })
  if (result.code !== 0) throw new Error(`creating the cluster's role failed: ${result.stderr}`)
}

/** Runs `body` with a new harness, torn down after it whether it succeeds or fails. */
export const withHosts = async <A>(options: HarnessOptions, body: (env: Harness) => Promise<A>): Promise<A> => {
  const env = await startHosts(options)
  try {
    return await body(env)
  } finally {
    await env.teardown()
  }
}
