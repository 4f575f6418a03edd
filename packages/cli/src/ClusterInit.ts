/**
 * `tensorlane cluster init`: a cluster's CA, a certificate and key per host (naming its name and
 * address) and per driver, the Postgres server's certificate and password, and the cluster.json
 * that names them all; then loads what it wrote with core's loader as every member will.
 * ECDSA P-256 keys and certificates are made with node's WebCrypto, so no openssl binary is needed.
 */
import "reflect-metadata"
import { randomBytes, webcrypto } from "node:crypto"
import * as fs from "node:fs"
import { isIP } from "node:net"
import * as path from "node:path"
import { type ClusterConfig, ClusterConfigFile, MEMBER_KEY_USAGES, clusterConfigConflict, loadClusterConfig } from "@tensorlane/core"
import * as x509 from "@peculiar/x509"
import * as Schema from "effect/Schema"
import { UsageError } from "./Errors.js"

export interface ClusterInitOptions {
  /** The folder to write; it must not exist or be empty. */
  readonly out: string
  readonly name: string
  readonly hosts: ReadonlyArray<{ readonly name: string; readonly address: string; readonly interface: string }>
  readonly drivers: ReadonlyArray<string>
  /** The port of every host's node. */
  readonly port: number
  readonly postgres: { readonly host: string; readonly port: number; readonly database: string; readonly user: string }
  /** How long the certificates are valid, from now. */
  readonly days: number
  readonly now?: Date
}

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const
// Another machine's clock a few minutes behind must not see the new certificates as not yet valid.
const CLOCK_SKEW_MS = 5 * 60 * 1000

const newKeys = () => webcrypto.subtle.generateKey(ALGORITHM, true, ["sign", "verify"]) as Promise<webcrypto.CryptoKeyPair>

const keyPem = async (keys: webcrypto.CryptoKeyPair): Promise<string> =>
  x509.PemConverter.encode(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey), "PRIVATE KEY")

// A positive serial of 16 random bytes, as RFC 5280 asks.
const serial = (): string => {
  const bytes = randomBytes(16)
  bytes[0] = (bytes[0]! & 0x7f) | 0x01
  return bytes.toString("hex")
}

interface Issued {
  readonly cert: string
  readonly key: string
}

/** The Postgres server's certificate serves only: its key, which the Postgres server holds, cannot log in to a member. */
const SERVER_USAGES = [x509.ExtendedKeyUsage.serverAuth]

/** A certificate for `names` (DNS names or IP addresses) issued by the CA, for TLS `usages`. */
const issue = async (
  ca: { readonly cert: x509.X509Certificate; readonly keys: webcrypto.CryptoKeyPair },
  subject: string,
  names: ReadonlyArray<string>,
  usages: ReadonlyArray<string>,
  validity: { readonly notBefore: Date; readonly notAfter: Date },
): Promise<Issued> => {
  const keys = await newKeys()
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject,
    issuer: ca.cert.subject,
    ...validity,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([...usages]),
      new x509.SubjectAlternativeNameExtension(names.map((value) => ({ type: isIP(value) !== 0 ? ("ip" as const) : ("dns" as const), value }))),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
    ],
  })
  return { cert: cert.toString("pem"), key: await keyPem(keys) }
}

/** The common name of a certificate's subject, with the characters a distinguished name reserves escaped. */
const subjectOf = (commonName: string, cluster: string): string => {
  const escape = (value: string) => value.replace(/[\\,+"<>;=#]/g, (c) => `\\${c}`)
  return `CN=${escape(commonName)}, O=${escape(`tensorlane cluster ${cluster}`)}`
}

/**
 * Writes a new cluster into `options.out` and returns it loaded. Throws UsageError for options that
 * do not make a valid config (checked before anything is written) or an `out` folder that is not empty.
 */
export const initCluster = async (options: ClusterInitOptions): Promise<ClusterConfig> => {
  const file: ClusterConfigFile = {
    name: options.name,
    ca: "ca.pem",
    postgres: { ...options.postgres, passwordFile: "postgres/password", ca: "ca.pem" },
    hosts: options.hosts.map((h) => ({ ...h, port: options.port, cert: `hosts/${h.name}.pem`, key: `hosts/${h.name}.key` })),
    drivers: options.drivers.map((name) => ({ name, cert: `drivers/${name}.pem`, key: `drivers/${name}.key` })),
  }
  try {
    Schema.decodeUnknownSync(ClusterConfigFile)(file)
  } catch (error) {
    throw new UsageError({ message: `cluster init: ${error instanceof Error ? error.message : String(error)}` })
  }
  const conflict = clusterConfigConflict(file)
  if (conflict !== undefined) throw new UsageError({ message: `cluster init: the config ${conflict}` })
  if (!Number.isInteger(options.days) || options.days < 1 || options.days > 3650) {
    throw new UsageError({ message: `cluster init: --days ${options.days}: a whole number from 1 to 3650 is needed` })
  }
  const out = path.resolve(options.out)
  if (fs.existsSync(out) && (!fs.statSync(out).isDirectory() || fs.readdirSync(out).length > 0)) {
    throw new UsageError({ message: `cluster init: ${out} exists and is not an empty folder; a cluster's CA is never overwritten` })
  }

  const now = options.now ?? new Date()
  const validity = { notBefore: new Date(now.getTime() - CLOCK_SKEW_MS), notAfter: new Date(now.getTime() + options.days * 86_400_000) }
  x509.cryptoProvider.set(webcrypto)
  const caKeys = await newKeys()
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: subjectOf(`tensorlane ${options.name} CA`, options.name),
    ...validity,
    keys: caKeys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  })
  const ca = { cert: caCert, keys: caKeys }
  const files = new Map<string, { readonly text: string; readonly secret: boolean }>()
  const put = (relative: string, issued: Issued) => {
    files.set(`${relative}.pem`, { text: issued.cert, secret: false })
    files.set(`${relative}.key`, { text: issued.key, secret: true })
  }
  put("ca", { cert: caCert.toString("pem"), key: await keyPem(caKeys) })
  for (const host of options.hosts) put(`hosts/${host.name}`, await issue(ca, subjectOf(host.name, options.name), [host.name, host.address], MEMBER_KEY_USAGES, validity))
  for (const driver of options.drivers) put(`drivers/${driver}`, await issue(ca, subjectOf(driver, options.name), [driver], MEMBER_KEY_USAGES, validity))
  put("postgres/server", await issue(ca, subjectOf(options.postgres.host, options.name), [options.postgres.host], SERVER_USAGES, validity))
  files.set("postgres/password", { text: `${randomBytes(24).toString("base64url")}\n`, secret: true })
  files.set("cluster.json", { text: `${JSON.stringify(file, null, 2)}\n`, secret: false })

  for (const folder of ["", "hosts", "drivers", "postgres"]) fs.mkdirSync(path.join(out, folder), { recursive: true, mode: 0o755 })
  for (const [relative, { text, secret }] of files) {
    const target = path.join(out, relative)
    // "wx": never replace a file; the mode applies on creation, before a byte of a key is written.
    fs.writeFileSync(target, text, { flag: "wx", mode: secret ? 0o600 : 0o644 })
    fs.chmodSync(target, secret ? 0o600 : 0o644)
  }
  return loadClusterConfig(path.join(out, "cluster.json"), now)
}
