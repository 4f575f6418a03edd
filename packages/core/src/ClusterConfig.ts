/**
 * The config of a cluster across hosts (`cluster.json`, written by `tensorlane cluster init`): its
 * Schema, the loader that reads the files it names (paths relative to the file) and checks every
 * certificate against the cluster's CA, and the mutual-TLS options of one member (a host or a driver).
 */
import { X509Certificate, createPrivateKey, type KeyObject } from "node:crypto"
import * as fs from "node:fs"
import { isIP } from "node:net"
import * as path from "node:path"
import type * as tls from "node:tls"
import * as Schema from "effect/Schema"
import { CertificateError, ClusterConfigError } from "./Errors.js"

/** A member's name: a DNS label in lower case, so that it can be a certificate's DNS name. */
const MemberName = Schema.String.check(
  Schema.isPattern(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, { expected: "a name of lower-case letters, digits and inner dashes (at most 63)" }),
)
const Port = Schema.Number.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 65535 }))
/** A node's port: its runner of the cluster's engine listens on the next one, which must be a port too. */
const NodePort = Schema.Number.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 65534 }))
const FilePath = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(4096))
const SqlName = Schema.String.check(Schema.isPattern(/^[a-z_][a-z0-9_]{0,62}$/, { expected: "a lower-case SQL name of at most 63 characters" }))

/**
 * The 16 bytes of an IP address (an IPv4 one as IPv4-mapped IPv6), or undefined for a string that is
 * not one; a zoned IPv6 address (`fe80::1%lo`) is none either: neither TLS nor a certificate takes it.
 */
const addressBytes = (address: string): Uint8Array | undefined => {
  const family = isIP(address)
  if (family === 0 || address.includes("%")) return undefined
  const bytes = new Uint8Array(16)
  if (family === 4) {
    bytes.set([0xff, 0xff, ...address.split(".").map(Number)], 10)
    return bytes
  }
  // A dotted IPv4 tail is the last two groups.
  const hex = address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) => `${((+a << 8) | +b).toString(16)}:${((+c << 8) | +d).toString(16)}`)
  const [head = "", tail] = hex.split("::")
  const groups = (part: string | undefined) => (part === undefined || part === "" ? [] : part.split(":").map((group) => parseInt(group, 16)))
  const before = groups(head)
  const after = groups(tail)
  const all = [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after]
  all.forEach((group, i) => bytes.set([group >> 8, group & 0xff], 2 * i))
  return bytes
}

const isIPv4Mapped = (bytes: Uint8Array) => bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff

/** One spelling per address: IPv4 (IPv4-mapped IPv6 included) dotted, IPv6 as eight full groups. */
const normalAddress = (address: string): string => {
  const bytes = addressBytes(address)
  if (bytes === undefined) return address
  if (isIPv4Mapped(bytes)) return [...bytes.subarray(12)].join(".")
  return Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16).padStart(4, "0")).join(":")
}

/** Whether an address's bytes are all zero, as IPv4, IPv6 or IPv4-mapped IPv6: a listener there takes every address. */
const isWildcard = (bytes: Uint8Array): boolean => (isIPv4Mapped(bytes) ? bytes.subarray(12) : bytes).every((b) => b === 0)

/** Where a node and its host's data planes listen: an IP address, never a wildcard one. */
const ListenAddress = Schema.String.check(
  Schema.makeFilter(
    (address: string) => {
      const bytes = addressBytes(address)
      return bytes !== undefined && !isWildcard(bytes)
    },
    { expected: "an IPv4 or IPv6 address other than 0.0.0.0 and :: (in any spelling, IPv4-mapped included), without a zone (%)" },
  ),
)
const InterfaceName = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_.:@-]{1,15}$/, { expected: "a network interface name (at most 15 characters)" }))
const DNS_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/
const DnsNameOrAddress = Schema.String.check(
  Schema.makeFilter((text: string) => DNS_NAME.test(text) || addressBytes(text) !== undefined, {
    expected: "a host name (dot-separated labels of letters, digits and inner dashes) or an IP address without a zone",
  }),
)

/** A host of the cluster's config file. */
export const ClusterHostEntry = Schema.Struct({
  name: MemberName,
  address: ListenAddress,
  port: NodePort,
  interface: InterfaceName,
  cert: FilePath,
  key: FilePath,
  /** How many actors its node runs at once, of all drivers together; default 4 per CPU of the host. */
  maxActors: Schema.optional(Schema.Number.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 65_536 }))),
})

/** A driver of the cluster's config file. */
export const ClusterDriverEntry = Schema.Struct({ name: MemberName, cert: FilePath, key: FilePath })

/** The Schema of `cluster.json`. */
export const ClusterConfigFile = Schema.Struct({
  name: MemberName,
  ca: FilePath,
  postgres: Schema.Struct({
    host: DnsNameOrAddress,
    port: Port,
    database: SqlName,
    user: SqlName,
    passwordFile: FilePath,
    ca: FilePath,
  }),
  hosts: Schema.Array(ClusterHostEntry).check(Schema.isMinLength(1), Schema.isMaxLength(4096)),
  drivers: Schema.Array(ClusterDriverEntry).check(Schema.isMaxLength(4096)),
})
export type ClusterConfigFile = typeof ClusterConfigFile.Type

/** A member's certificate, read and checked; its key is read only by `tlsOptionsFor` of that member. */
export interface MemberCredentials {
  readonly name: string
  /** The certificate (PEM) and its absolute path. */
  readonly cert: string
  readonly certPath: string
  readonly keyPath: string
  readonly validTo: Date
}

export interface ClusterHost extends MemberCredentials {
  readonly address: string
  readonly port: number
  readonly interface: string
  /** How many actors its node runs at once; undefined: 4 per CPU of the host. */
  readonly maxActors: number | undefined
}

export type ClusterDriver = MemberCredentials

/** A loaded cluster config: the file's fields, with paths absolute and the certificates and password read. */
export interface ClusterConfig {
  readonly file: string
  readonly name: string
  /** The cluster CA's certificate (PEM) and its absolute path. */
  readonly ca: string
  readonly caPath: string
  readonly postgres: {
    readonly host: string
    readonly port: number
    readonly database: string
    readonly user: string
    readonly password: string
    readonly passwordFile: string
    /** The CA (PEM) that signed the Postgres server's certificate. */
    readonly ca: string
    readonly caPath: string
  }
  readonly hosts: ReadonlyArray<ClusterHost>
  readonly drivers: ReadonlyArray<ClusterDriver>
}

/** The largest file a config names (a certificate chain, a password); larger is refused unread. */
const MAX_FILE_BYTES = 1024 * 1024

const readFile = (file: string, what: string, fail: (message: string) => Error): string => {
  let stat: fs.Stats
  try {
    stat = fs.statSync(file)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw fail(code === "ENOENT" ? `${what} ${file} does not exist` : `${what} ${file} cannot be read (${code ?? String(error)})`)
  }
  if (!stat.isFile()) throw fail(`${what} ${file} is not a file`)
  if (stat.size > MAX_FILE_BYTES) throw fail(`${what} ${file} has ${stat.size} bytes, more than the ${MAX_FILE_BYTES} a cluster file may have`)
  try {
    return fs.readFileSync(file, "utf8")
  } catch (error) {
    throw fail(`${what} ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`)
  }
}

/** Throws when other users may read `file` (a key, a password): like ssh and Postgres, such a secret is refused, not used. */
const checkPrivate = (file: string, what: string, fail: (message: string) => Error): void => {
  if ((fs.statSync(file).mode & 0o077) !== 0) throw fail(`${what} ${file} is readable by other users: chmod 600 it`)
}

const parseCertificate = (pem: string, file: string, identity: string): X509Certificate => {
  try {
    return new X509Certificate(pem)
  } catch (error) {
    throw new CertificateError({ message: `${file} is not a PEM certificate (${error instanceof Error ? error.message : String(error)})`, path: file, identity })
  }
}

/** Throws when `cert` is outside its dates at `now`. */
const checkDates = (cert: X509Certificate, file: string, identity: string, now: Date): void => {
  const from = new Date(cert.validFrom)
  const to = new Date(cert.validTo)
  if (now < from) throw new CertificateError({ message: `the certificate ${file} of ${identity} is valid only from ${from.toISOString()}`, path: file, identity })
  if (now > to) throw new CertificateError({ message: `the certificate ${file} of ${identity} expired at ${to.toISOString()}`, path: file, identity })
}

/**
 * The extended key usages of a member's certificate (serverAuth, clientAuth): every member serves (a
 * node, its runner, an agent) and connects. TLS servers refuse a client certificate without
 * clientAuth, so the Postgres server's certificate (serverAuth only) cannot pass for a member.
 */
export const MEMBER_KEY_USAGES: ReadonlyArray<string> = ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]

/** Checks that `cert` was issued by the cluster's CA, is within its dates, serves and connects, and names `identity` (and `address` for a host). */
const checkMember = (cert: X509Certificate, ca: X509Certificate, file: string, identity: string, now: Date, address?: string): void => {
  if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) {
    throw new CertificateError({ message: `the certificate ${file} of ${identity} is not signed by the cluster's CA`, path: file, identity })
  }
  checkDates(cert, file, identity, now)
  const usages = cert.keyUsage ?? []
  if (!MEMBER_KEY_USAGES.every((usage) => usages.includes(usage))) {
    throw new CertificateError({
      message: `the certificate ${file} of ${identity} is not for both TLS servers and clients (its extended key usages: ${usages.join(", ") || "none"})`,
      path: file,
      identity,
    })
  }
  if (!namesMember(cert, identity)) {
    throw new CertificateError({ message: `the certificate ${file} does not name ${identity} (its names: ${cert.subjectAltName ?? "none"})`, path: file, identity })
  }
  if (address !== undefined && cert.checkIP(address) === undefined) {
    throw new CertificateError({ message: `the certificate ${file} of ${identity} does not name its address ${address}`, path: file, identity })
  }
}

/** Whether the certificate's DNS names include `name` exactly (no wildcards, not the subject's CN). */
const namesMember = (cert: X509Certificate, name: string): boolean =>
  cert.checkHost(name, { subject: "never", wildcards: false, partialWildcards: false }) !== undefined

const duplicates = (values: ReadonlyArray<string>): ReadonlyArray<string> => [...new Set(values.filter((value, i) => values.indexOf(value) !== i))]

/** A DNS name as a certificate compares it: case aside, without a final dot. */
const dnsName = (name: string) => name.toLowerCase().replace(/\.$/, "")

/**
 * What makes a config that passed its Schema inconsistent, as the end of a sentence about it, or
 * undefined: a name given twice (hosts and drivers share one set), a port that two hosts on one
 * address take (a node takes its port and its runner the next), or a Postgres server named like a
 * member (its certificate, from the cluster's CA, would then name that member).
 */
export const clusterConfigConflict = (config: ClusterConfigFile): string | undefined => {
  const names = [...config.hosts.map((h) => h.name), ...config.drivers.map((d) => d.name)]
  const sameName = duplicates(names)
  if (sameName.length > 0) return `names ${sameName.join(", ")} more than once (hosts and drivers share one set of names)`
  const sameEndpoint = duplicates(config.hosts.flatMap((h) => [h.port, h.port + 1].map((port) => `${normalAddress(h.address)} port ${port}`)))
  if (sameEndpoint.length > 0) return `gives ${sameEndpoint.join(", ")} to more than one host (a host's node takes its port and the next)`
  if (names.includes(dnsName(config.postgres.host))) {
    return `names its Postgres server ${config.postgres.host}, a member's name: the server's certificate would name that member`
  }
  return undefined
}

/**
 * Reads and checks the cluster config at `file`: the Schema, what `clusterConfigConflict` finds,
 * the CA, every member's certificate (issued by the CA, within its dates, for TLS servers and
 * clients, naming the member and a host's address) and the Postgres password (one line, in a file
 * that only its owner may read). Throws ClusterConfigError for a missing,
 * unreadable or invalid config or password file, CertificateError for a certificate.
 */
export const loadClusterConfig = (file: string, now: Date = new Date()): ClusterConfig => {
  const absolute = path.resolve(file)
  const configError = (message: string) => new ClusterConfigError({ message, path: absolute })
  const text = readFile(absolute, "the cluster config", configError)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw configError(`the cluster config ${absolute} is not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  let decoded: ClusterConfigFile
  try {
    decoded = Schema.decodeUnknownSync(ClusterConfigFile)(json, { onExcessProperty: "error" })
  } catch (error) {
    throw configError(`the cluster config ${absolute} is invalid: ${error instanceof Error ? error.message : String(error)}`)
  }
  const conflict = clusterConfigConflict(decoded)
  if (conflict !== undefined) throw configError(`the cluster config ${absolute} ${conflict}`)

  const dir = path.dirname(absolute)
  const resolve = (relative: string) => path.resolve(dir, relative)
  const certificate = (relative: string, identity: string) => {
    const certPath = resolve(relative)
    const pem = readFile(certPath, `the certificate of ${identity}`, (message) => new CertificateError({ message, path: certPath, identity }))
    return { certPath, pem, cert: parseCertificate(pem, certPath, identity) }
  }
  const authority = (relative: string, identity: string) => {
    const ca = certificate(relative, identity)
    if (!ca.cert.ca) throw new CertificateError({ message: `${ca.certPath} is not a CA certificate`, path: ca.certPath, identity })
    checkDates(ca.cert, ca.certPath, identity, now)
    return ca
  }
  const ca = authority(decoded.ca, `the CA of cluster ${decoded.name}`)
  const member = (entry: { readonly name: string; readonly cert: string; readonly key: string }, address?: string): MemberCredentials => {
    const { certPath, pem, cert } = certificate(entry.cert, entry.name)
    checkMember(cert, ca.cert, certPath, entry.name, now, address)
    return { name: entry.name, cert: pem, certPath, keyPath: resolve(entry.key), validTo: new Date(cert.validTo) }
  }
  const postgresCa = authority(decoded.postgres.ca, `the Postgres CA of cluster ${decoded.name}`)
  const passwordFile = resolve(decoded.postgres.passwordFile)
  const passwordError = (message: string) => new ClusterConfigError({ message, path: passwordFile })
  const password = readFile(passwordFile, "the Postgres password file", passwordError).replace(/\r?\n$/, "")
  checkPrivate(passwordFile, "the Postgres password file", passwordError)
  if (password.length === 0 || /[\r\n]/.test(password)) {
    throw new ClusterConfigError({ message: `the Postgres password file ${passwordFile} must hold one non-empty line`, path: passwordFile })
  }
  return {
    file: absolute,
    name: decoded.name,
    ca: ca.pem,
    caPath: ca.certPath,
    postgres: { ...decoded.postgres, password, passwordFile, ca: postgresCa.pem, caPath: postgresCa.certPath },
    hosts: decoded.hosts.map((h) => ({ ...member(h, h.address), address: h.address, port: h.port, interface: h.interface, maxActors: h.maxActors })),
    drivers: decoded.drivers.map((d) => member(d)),
  }
}

/** How long a connection to a member's server (a node, its engine's runner, an actor's agent) has for its TLS handshake. */
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000

/** The mutual-TLS options of one member of a cluster. */
export interface ClusterTls {
  readonly identity: string
  /** node:tls server options: the member's certificate, client certificates required and checked against the cluster's CA only. */
  readonly server: tls.TlsOptions
  /** node:tls client options for a connection to `peer` (a member's name): the server's certificate must name it. */
  readonly client: (peer: string) => tls.ConnectionOptions
  /**
   * The member that the peer of an authorized connection is (its certificate names a host or a
   * driver of this cluster); a server calls it on each secure connection. Throws CertificateError.
   */
  readonly peerName: (socket: tls.TLSSocket) => string
}

/**
 * The node:tls options of `identity` (a host or driver of `config`), with its key read from its key
 * file: mutual authentication under the cluster's CA alone (not the system's CAs), TLS 1.3, and a
 * peer's certificate naming a member. Throws CertificateError for an unknown identity or a key that
 * is missing, unreadable, readable by others or not the certificate's.
 */
export const tlsOptionsFor = (config: ClusterConfig, identity: string): ClusterTls => {
  const members: ReadonlyArray<MemberCredentials> = [...config.hosts, ...config.drivers]
  const self = members.find((m) => m.name === identity)
  if (self === undefined) {
    throw new CertificateError({ message: `${identity} is neither a host nor a driver of cluster ${config.name} (${config.file})`, path: config.file, identity })
  }
  const keyError = (message: string) => new CertificateError({ message, path: self.keyPath, identity })
  const key = readFile(self.keyPath, `the key of ${identity}`, keyError)
  checkPrivate(self.keyPath, `the key of ${identity}`, keyError)
  let keyObject: KeyObject
  try {
    keyObject = createPrivateKey(key)
  } catch (error) {
    throw keyError(`${self.keyPath} is not a PEM private key (${error instanceof Error ? error.message : String(error)})`)
  }
  if (!new X509Certificate(self.cert).checkPrivateKey(keyObject)) throw keyError(`the key ${self.keyPath} is not the key of the certificate ${self.certPath}`)

  const memberOf = (cert: X509Certificate): string | undefined => members.find((m) => namesMember(cert, m.name))?.name
  const common = { key, cert: self.cert, ca: config.ca, minVersion: "TLSv1.3" as const }
  return {
    identity,
    // A peer that connects and never completes its handshake is dropped after TLS_HANDSHAKE_TIMEOUT_MS (Node's default is 2 minutes).
    server: { ...common, requestCert: true, rejectUnauthorized: true, handshakeTimeout: TLS_HANDSHAKE_TIMEOUT_MS },
    client: (peer) => ({
      ...common,
      rejectUnauthorized: true,
      servername: peer,
      checkServerIdentity: (_host, cert) => {
        const x509 = new X509Certificate(cert.raw)
        return namesMember(x509, peer) && memberOf(x509) !== undefined
          ? undefined
          : new CertificateError({ message: `the server's certificate does not name ${peer} of cluster ${config.name} (its names: ${x509.subjectAltName ?? "none"})`, path: config.file, identity: peer })
      },
    }),
    peerName: (socket) => {
      const cert = socket.getPeerX509Certificate()
      const name = socket.authorized && cert !== undefined ? memberOf(cert) : undefined
      if (name === undefined) {
        throw new CertificateError({
          message: `a peer of ${identity} has no certificate of cluster ${config.name}${socket.authorizationError !== undefined ? ` (${String(socket.authorizationError)})` : ""}`,
          path: config.file,
          identity: "peer",
        })
      }
      return name
    },
  }
}
