/**
 * `tensorlane doctor --cluster cluster.json`: checks a cluster across hosts from a driver's seat.
 * The config and every certificate (core's loader), Postgres (TLS under the cluster's CA, the
 * cluster's role and password, and that a connection without TLS is refused before any password),
 * and each host's node: reachable under mutual TLS with the driver's credentials, its certificate
 * and its dates, and what the node reports (CPUs, memory, GPUs, installed transports).
 */
import { X509Certificate, randomBytes } from "node:crypto"
import * as tls from "node:tls"
import { PgClient } from "@effect/sql-pg"
import { type ClusterConfig, type HostInfo, loadClusterConfig, tlsOptionsFor } from "@tensorlane/core"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Reactivity from "effect/reactivity/Reactivity"
import { UsageError } from "./Errors.js"

/** How long each check waits for an answer. */
const CHECK_TIMEOUT_MS = 5_000
/** Certificates that expire sooner than this are reported as a problem. */
const EXPIRY_WARNING_DAYS = 30
const DAY_MS = 86_400_000

export interface PostgresReport {
  readonly endpoint: string
  readonly ok: boolean
  readonly problem?: string
  readonly server?: string
  readonly tls?: string
  readonly passwordEncryption?: string
  /** Whether the server refused the cluster's role without TLS for want of a pg_hba.conf line, before any password (it must). */
  readonly plainRefused?: boolean
}

export interface HostReport {
  readonly name: string
  readonly endpoint: string
  readonly ok: boolean
  readonly problem?: string
  /** The dates of the certificate the node presented. */
  readonly certificate?: { readonly validFrom: string; readonly validTo: string; readonly daysLeft: number }
  /** What the node reports of its host. */
  readonly node?: { readonly cpus: number; readonly memoryBytes: number; readonly gpus: number; readonly transports: ReadonlyArray<string> }
}

export interface ClusterDoctorReport {
  readonly cluster: string
  readonly file: string
  readonly driver: string
  readonly ca: { readonly validTo: string; readonly daysLeft: number }
  readonly postgres: PostgresReport
  readonly hosts: ReadonlyArray<HostReport>
  readonly ok: boolean
}

const describeError = (error: unknown): string => {
  const reason = (error as { reason?: { _tag?: string; cause?: { code?: string; message?: string } } })?.reason
  if (reason !== undefined) {
    const cause = reason.cause
    return [reason._tag, cause?.code, cause?.message].filter((part) => part !== undefined && part !== "").join(": ")
  }
  return error instanceof Error ? error.message : String(error)
}

const daysLeft = (validTo: Date, now: Date) => Math.floor((validTo.getTime() - now.getTime()) / DAY_MS)

/** The SQLSTATE of Postgres refusing a connection for want of a pg_hba.conf line that lets it in (not for its password, 28P01). */
const NO_HBA_ENTRY = "28000"

/** The SQLSTATE of a failed query, where the server answered with one. */
const sqlState = (error: unknown): string | undefined => (error as { reason?: { cause?: { code?: string } } })?.reason?.cause?.code

/** One query as the cluster's role with `password`, with `ssl` (the cluster's CA) or without TLS. */
const queryPostgres = (config: ClusterConfig, ssl: tls.ConnectionOptions | false, password: string) =>
  Effect.gen(function* () {
    const pg = config.postgres
    const sql = yield* PgClient.makeClient({
      host: pg.host,
      port: pg.port,
      database: pg.database,
      username: pg.user,
      password: Redacted.make(password),
      ssl,
      connectTimeout: `${CHECK_TIMEOUT_MS} millis`,
    })
    const rows = yield* sql<{ server: string; encryption: string; tls: string | null }>`
      select version() as server, current_setting('password_encryption') as encryption, s.version as tls
      from pg_stat_ssl s where s.pid = pg_backend_pid()`
    return rows[0]!
  }).pipe(Effect.scoped, Effect.provide(Reactivity.layer), Effect.timeout(CHECK_TIMEOUT_MS * 2), Effect.result, Effect.runPromise)

/**
 * Postgres as the cluster's role: a TLS connection under the cluster's CA with the role's password,
 * and one without TLS that must be refused before any password. That one offers a random wrong
 * password, since a server may ask for the password in clear text: the role's goes only over TLS.
 */
export const checkPostgres = async (config: ClusterConfig): Promise<PostgresReport> => {
  const pg = config.postgres
  const endpoint = `${pg.host}:${pg.port} database ${pg.database} as ${pg.user}`
  const [secure, plain] = await Promise.all([
    queryPostgres(config, { ca: pg.ca, rejectUnauthorized: true }, pg.password),
    queryPostgres(config, false, randomBytes(24).toString("base64url")),
  ])
  const plainRefused = plain._tag === "Failure" && sqlState(plain.failure) === NO_HBA_ENTRY
  if (secure._tag === "Failure") return { endpoint, ok: false, problem: describeError(secure.failure), plainRefused }
  const { server, encryption, tls: version } = secure.success
  const problems = [
    ...(version === null ? ["the connection is not encrypted"] : []),
    ...(plainRefused
      ? []
      : [
          `the server does not refuse the cluster's role without TLS (${plain._tag === "Success" ? "it let a wrong password in" : describeError(plain.failure)}): its pg_hba.conf needs hostssl lines only`,
        ]),
    ...(encryption === "scram-sha-256" ? [] : [`password_encryption is ${encryption}, not scram-sha-256`]),
  ]
  return {
    endpoint,
    ok: problems.length === 0,
    ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
    server: server.split(" on ")[0]!,
    tls: version ?? "none",
    passwordEncryption: encryption,
    plainRefused,
  }
}

/** A mutual-TLS handshake with a host's node as `driver`: the dates of its certificate, or why it failed. */
const handshake = (options: tls.ConnectionOptions): Promise<{ readonly validFrom: Date; readonly validTo: Date } | Error> =>
  new Promise((resolve) => {
    const socket = tls.connect({ ...options, timeout: CHECK_TIMEOUT_MS })
    const done = (result: { readonly validFrom: Date; readonly validTo: Date } | Error) => {
      socket.destroy()
      resolve(result)
    }
    socket.once("secureConnect", () => {
      const cert = socket.getPeerX509Certificate()
      done(cert === undefined ? new Error("the node presented no certificate") : { validFrom: new Date(cert.validFrom), validTo: new Date(cert.validTo) })
    })
    socket.once("timeout", () => done(new Error(`no TLS handshake within ${CHECK_TIMEOUT_MS} ms`)))
    socket.once("error", (error) => done(error))
  })

/**
 * What each live node reports of its host to `driver`, by host name (core bounds each host's answer);
 * undefined when the cluster's storage, which lists the live nodes, does not answer (Postgres's own
 * check says why).
 */
const nodeReports = async (config: ClusterConfig, driver: string): Promise<ReadonlyMap<string, HostInfo> | undefined> => {
  // Loaded only now: the rest of doctor works without core's runtime.
  const { start } = await import("@tensorlane/core")
  const cluster = await start({ cluster: config.file, driver })
  try {
    return new Map((await cluster.hosts()).map((info) => [info.name, info]))
  } catch {
    return undefined
  } finally {
    await cluster.shutdown()
  }
}

export const runClusterDoctor = async (file: string, driverName?: string, now: Date = new Date()): Promise<ClusterDoctorReport> => {
  const config = loadClusterConfig(file, now)
  const driver = driverName ?? config.drivers[0]?.name
  if (driver === undefined || !config.drivers.some((d) => d.name === driver)) {
    throw new UsageError({ message: `doctor --cluster: ${driver ?? "a driver"} is not a driver of ${config.file} (its drivers: ${config.drivers.map((d) => d.name).join(", ") || "none"})` })
  }
  const credentials = tlsOptionsFor(config, driver)
  const [postgres, presented, reported] = await Promise.all([
    checkPostgres(config),
    Promise.all(config.hosts.map((h) => handshake({ ...credentials.client(h.name), host: h.address, port: h.port }))),
    nodeReports(config, driver),
  ])
  const hosts = config.hosts.map((h, i): HostReport => {
    const endpoint = `${h.address}:${h.port}`
    const cert = presented[i]!
    if (cert instanceof Error) return { name: h.name, endpoint, ok: false, problem: `mutual TLS failed: ${describeError(cert)}` }
    const certificate = { validFrom: cert.validFrom.toISOString(), validTo: cert.validTo.toISOString(), daysLeft: daysLeft(cert.validTo, now) }
    const info = reported?.get(h.name)
    const problems = [
      ...(certificate.daysLeft < EXPIRY_WARNING_DAYS ? [`its certificate expires in ${certificate.daysLeft} days`] : []),
      ...(reported !== undefined && info === undefined ? ["its node took the TLS connection but is not among the cluster's live runners"] : []),
    ]
    return {
      name: h.name,
      endpoint,
      ok: problems.length === 0,
      ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
      certificate,
      ...(info !== undefined ? { node: { cpus: info.cpus, memoryBytes: info.memoryBytes, gpus: info.gpus, transports: info.transports } } : {}),
    }
  })
  const caValidTo = new Date(new X509Certificate(config.ca).validTo)
  return {
    cluster: config.name,
    file: config.file,
    driver,
    ca: { validTo: caValidTo.toISOString(), daysLeft: daysLeft(caValidTo, now) },
    postgres,
    hosts,
    ok: postgres.ok && hosts.every((h) => h.ok) && daysLeft(caValidTo, now) >= EXPIRY_WARNING_DAYS,
  }
}

const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`

/** The report as lines of text: a line per check, "ok" or what is wrong. */
export const formatClusterDoctor = (report: ClusterDoctorReport): string => {
  const mark = (ok: boolean) => (ok ? "ok     " : "PROBLEM")
  const pg = report.postgres
  const lines = [
    `cluster ${report.cluster} (${report.file}), checked as driver ${report.driver}`,
    `${mark(report.ca.daysLeft >= EXPIRY_WARNING_DAYS)} CA valid until ${report.ca.validTo} (${report.ca.daysLeft} days)`,
    `${mark(pg.ok)} postgres ${pg.endpoint}: ${
      pg.server !== undefined ? `${pg.server}, ${pg.tls}, password_encryption ${pg.passwordEncryption}, without TLS ${pg.plainRefused === true ? "refused" : "ACCEPTED"}` : ""
    }${pg.problem !== undefined ? `${pg.server !== undefined ? "; " : ""}${pg.problem}` : ""}`,
    ...report.hosts.map((h) => {
      const cert = h.certificate !== undefined ? `mutual TLS, certificate valid until ${h.certificate.validTo} (${h.certificate.daysLeft} days)` : ""
      const node = h.node !== undefined ? `; ${h.node.cpus} CPUs, ${gib(h.node.memoryBytes)}, ${h.node.gpus} GPUs, transports: object-store${h.node.transports.map((t) => `, ${t}`).join("")}` : ""
      return `${mark(h.ok)} host ${h.name} ${h.endpoint}: ${cert}${node}${h.problem !== undefined ? `${cert !== "" ? "; " : ""}${h.problem}` : ""}`
    }),
  ]
  return lines.join("\n")
}
