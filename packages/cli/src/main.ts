#!/usr/bin/env node
/**
 * The tensorlane command: `doctor`, `bench`, `build`, `install`, `cluster init` and `node` (USAGE
 * says what each does). Errors of the command line and of a build print `<_tag>: <message>` and exit
 * with 2; those of an install, a cluster config or a certificate print the same and exit with 1.
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { CertificateError, ClusterConfigError, startNode } from "@tensorlane/core"
import { libraryCacheDir } from "@tensorlane/core/native"
import { LOOPS, type Loop, runBench } from "./Bench.js"
import { formatTable } from "./BenchReport.js"
import { runBuild } from "./Build.js"
import { formatDoctor, runDoctor } from "./Doctor.js"
import { BenchTransportError, BuildError, DiskFullError, DownloadError, PackageMissingError, UnsafeWheelError, UsageError, WheelHashError } from "./Errors.js"
import { INSTALL_TARGETS, installWheel, targetWheels } from "./Install.js"
import { progressBar } from "./ProgressBar.js"
import { parseSizes } from "./Sizes.js"
import { renderSvg } from "./SvgChart.js"

const USAGE = `usage:
  tensorlane cluster init --hosts <name=address[@interface],...> --out <folder> [--drivers driver] [--name tensorlane]
                          [--port 7400] [--interface eth0] [--postgres <host[:port]>] [--database tensorlane]
                          [--user tensorlane] [--days 365]
      writes a cluster into a new folder: cluster.json, the cluster's CA (ca.key stays with you), a
      certificate and key per host (naming its name and address) and per driver, the Postgres
      server's certificate and password (postgres/); --postgres defaults to the first host's address
  tensorlane node --config <cluster.json> --name <host>
      runs the node of a host of a cluster across hosts: listens on the host's address under mutual
      TLS and starts the actors that drivers place on the host; SIGTERM or SIGINT ends it and them
  tensorlane doctor [--json]
      every transport with its state, library versions and locations, the UCX transports NIXL sees
  tensorlane doctor --cluster <cluster.json> [--driver <name>] [--json]
      checks a cluster across hosts as that driver (default the config's first): Postgres (TLS under
      the cluster's CA, the cluster's role, no entry without TLS), every host's node (mutual TLS, its
      certificate's dates, what it reports: CPUs, memory, GPUs, transports); exits with 1 on a problem
  tensorlane bench [--transports object-store,gloo,nixl] [--sizes 4KiB,1MiB,64MiB,256MiB] [--repeats 21]
                   [--loops released,natural] [--min-time-ms 1000] [--warmups 2] [--modules <specifier,...>]
                   [--json <file>] [--svg <file>] [--producer-env NAME=value ...] [--consumer-env NAME=value ...]
      times consumer.numel(producer.make(n)) actor to actor, submit to result, where the producer
      returns n bytes of float32 ones: the median of at least --repeats timed runs per transport,
      size and loop, more until they add up to --min-time-ms, next to memcpy, TCP loopback and raw
      Gloo measured in the same run; then the first 10 calls of a fresh cluster (cold) per transport
      and size; --loops: "released" releases both refs by hand, "natural" leaves them to the garbage
      collector; default transports: object-store and every CPU transport that doctor finds ready;
      --modules: more transport modules to load (your own transport);
      --producer-env / --consumer-env: an environment variable of that actor's process (repeatable)
  tensorlane build <gloo|nixl|nccl|symmetric-mem|package name>
      builds the transport's addon from the sources its package ships, into the per-user cache
      (\$XDG_CACHE_HOME/tensorlane, else ~/.cache/tensorlane), for a machine that no prebuilt platform
      package covers; needs cmake, a C++ compiler and the transport's system libraries (gloo: libgloo-dev)
  tensorlane install <nixl|nccl|nvshmem>... [--into <folder>] [--from <folder>]
      downloads the wheels of the target's run-time libraries that its package pins, from PyPI over
      https, checks their sha256 and unpacks the libraries and their licence files into
      <folder>/<wheel>-<version> (default: \${XDG_CACHE_HOME:-~/.cache}/tensorlane/libraries, where
      the loaders look); a wheel installed there already is not fetched again; --from: a folder
      holding the wheel files, used instead of downloading them (a machine offline)
  tensorlane bench --hosts <producer,consumer> --cluster <cluster.json> [--driver <name>] [options above]
      the same across two hosts of a cluster (their nodes running): the producer on the first host,
      the consumer on the second, next to a raw TCP stream between the same two hosts measured in
      the same run; default transport gloo; prints each transport's share of that stream at the
      largest size against the bar of 70%`

const count = (name: string, text: string, min: number): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n < min) throw new UsageError({ message: `--${name} ${text}: a whole number >= ${min} is needed` })
  return n
}

/** `NAME=value` options, each an environment variable of an actor process. */
const environment = (option: string, items: ReadonlyArray<string> | undefined): Readonly<Record<string, string>> =>
  Object.fromEntries(
    (items ?? []).map((item) => {
      const at = item.indexOf("=")
      const name = at < 0 ? "" : item.slice(0, at)
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new UsageError({ message: `--${option} ${item}: NAME=value is needed, NAME a variable name (like TENSORLANE_GLOO_DEVICE_CPUS=1)` })
      }
      return [name, item.slice(at + 1)]
    }),
  )

const list = (text: string | undefined): ReadonlyArray<string> | undefined =>
  text === undefined ? undefined : text.split(",").map((s) => s.trim()).filter((s) => s.length > 0)

const loopsOf = (text: string): ReadonlyArray<Loop> => {
  const loops = list(text) ?? []
  const unknown = loops.find((loop) => !(LOOPS as ReadonlyArray<string>).includes(loop))
  if (unknown !== undefined || loops.length === 0) throw new UsageError({ message: `--loops ${text}: one or more of ${LOOPS.join(", ")} is needed` })
  return loops as ReadonlyArray<Loop>
}

/** Runs parseArgs, turning its errors (unknown option, missing value) into a UsageError. */
const usage = <A>(parse: () => A): A => {
  try {
    return parse()
  } catch (error) {
    throw new UsageError({ message: `${error instanceof Error ? error.message : String(error)}\n${USAGE}` })
  }
}

const doctor = async (args: ReadonlyArray<string>): Promise<number> => {
  const { values } = usage(() => parseArgs({ args: [...args], options: { json: { type: "boolean" }, cluster: { type: "string" }, driver: { type: "string" } } }))
  if (values.cluster !== undefined) {
    const { formatClusterDoctor, runClusterDoctor } = await import("./ClusterDoctor.js")
    const report = await runClusterDoctor(values.cluster, values.driver)
    console.log(values.json === true ? JSON.stringify(report, null, 2) : formatClusterDoctor(report))
    return report.ok ? 0 : 1
  }
  if (values.driver !== undefined) throw new UsageError({ message: `--driver goes with --cluster\n${USAGE}` })
  const report = await runDoctor()
  console.log(values.json === true ? JSON.stringify(report, null, 2) : formatDoctor(report))
  return 0
}

const bench = async (args: ReadonlyArray<string>): Promise<void> => {
  const { values } = usage(() =>
    parseArgs({
      args: [...args],
      options: {
        transports: { type: "string" },
        sizes: { type: "string", default: "4KiB,1MiB,64MiB,256MiB" },
        loops: { type: "string", default: LOOPS.join(",") },
        repeats: { type: "string", default: "21" },
        "min-time-ms": { type: "string", default: "1000" },
        warmups: { type: "string", default: "2" },
        modules: { type: "string" },
        json: { type: "string" },
        svg: { type: "string" },
        "producer-env": { type: "string", multiple: true },
        "consumer-env": { type: "string", multiple: true },
        hosts: { type: "string" },
        cluster: { type: "string" },
        driver: { type: "string" },
      },
    }),
  )
  const hosts = list(values.hosts)
  if ((hosts === undefined) !== (values.cluster === undefined)) throw new UsageError({ message: `--hosts and --cluster go together\n${USAGE}` })
  if (hosts !== undefined && hosts.length !== 2) throw new UsageError({ message: `--hosts ${values.hosts}: two hosts are needed, producer,consumer` })
  if (values.driver !== undefined && hosts === undefined) throw new UsageError({ message: `--driver goes with --hosts and --cluster\n${USAGE}` })
  const options = {
    transports: list(values.transports),
    modules: list(values.modules) ?? [],
    sizes: parseSizes(values.sizes),
    loops: loopsOf(values.loops),
    repeats: count("repeats", values.repeats, 1),
    warmups: count("warmups", values.warmups, 0),
    minTimeMs: count("min-time-ms", values["min-time-ms"], 0),
    actorEnv: { producer: environment("producer-env", values["producer-env"]), consumer: environment("consumer-env", values["consumer-env"]) },
    ...(hosts !== undefined && values.cluster !== undefined
      ? { across: { cluster: values.cluster, producer: hosts[0]!, consumer: hosts[1]!, ...(values.driver !== undefined ? { driver: values.driver } : {}) } }
      : {}),
  }
  const bar = progressBar()
  let result
  try {
    result = await runBench(options, bar.update)
  } finally {
    bar.done()
  }
  console.log(formatTable(result))
  if (values.json !== undefined) fs.writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`)
  if (values.svg !== undefined) fs.writeFileSync(values.svg, renderSvg(result))
}

const build = async (args: ReadonlyArray<string>): Promise<void> => {
  const { positionals } = usage(() => parseArgs({ args: [...args], options: {}, allowPositionals: true }))
  if (positionals.length !== 1) throw new UsageError({ message: `tensorlane build takes one transport\n${USAGE}` })
  const built = await runBuild(positionals[0], process.cwd())
  console.log(`built ${built.packageName}@${built.version}: ${built.files.map((f) => join(built.dir, f)).join(", ")}`)
}

const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`

const install = async (args: ReadonlyArray<string>): Promise<void> => {
  const { values, positionals } = usage(() => parseArgs({ args: [...args], allowPositionals: true, options: { into: { type: "string" }, from: { type: "string" } } }))
  if (positionals.length === 0) throw new UsageError({ message: `tensorlane install needs a target: ${Object.keys(INSTALL_TARGETS).join(", ")}\n${USAGE}` })
  const root = values.into ?? libraryCacheDir()
  // Exiting runs the installer's exit hook, which removes its temporary folders; a signal's default would not.
  process.once("SIGINT", () => process.exit(130))
  process.once("SIGTERM", () => process.exit(143))
  for (const target of positionals) {
    for (const wheel of await targetWheels(target)) {
      const done = await installWheel(wheel, { root, ...(values.from !== undefined ? { from: values.from } : {}) })
      const fetched = values.from !== undefined ? `copied from ${values.from}` : `downloaded ${megabytes(done.downloadedBytes)}`
      console.log(done.fresh ? `${done.wheel}: ${fetched}, unpacked ${done.files} files (${megabytes(done.unpackedBytes)}) into ${done.folder}` : `${done.wheel}: already in ${done.folder}`)
    }
  }
}

/** `name=address[@interface]`: a host of `cluster init`. */
const hostSpec = (item: string, fallbackInterface: string) => {
  const match = /^([^=]+)=([^@]+)(?:@(.+))?$/.exec(item)
  if (match === null) throw new UsageError({ message: `--hosts ${item}: name=address[@interface] is needed, like h1=10.0.0.11@eth0` })
  return { name: match[1]!, address: match[2]!, interface: match[3] ?? fallbackInterface }
}

/** `host[:port]`, a bracketed IPv6 address for a host with a port. */
const endpoint = (text: string, fallbackPort: number) => {
  const match = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(text)
  if (match === null) return { host: text, port: fallbackPort }
  return { host: match[1] ?? match[2]!, port: match[3] === undefined ? fallbackPort : count("postgres", match[3], 1) }
}

const cluster = async (args: ReadonlyArray<string>): Promise<void> => {
  const [subcommand, ...rest] = args
  if (subcommand !== "init") throw new UsageError({ message: `unknown cluster command "${subcommand ?? ""}"\n${USAGE}` })
  const { values } = usage(() =>
    parseArgs({
      args: rest,
      options: {
        hosts: { type: "string" },
        drivers: { type: "string", default: "driver" },
        out: { type: "string" },
        name: { type: "string", default: "tensorlane" },
        port: { type: "string", default: "7400" },
        interface: { type: "string", default: "eth0" },
        postgres: { type: "string" },
        database: { type: "string", default: "tensorlane" },
        user: { type: "string", default: "tensorlane" },
        days: { type: "string", default: "365" },
      },
    }),
  )
  if (values.hosts === undefined || values.out === undefined) throw new UsageError({ message: `cluster init needs --hosts and --out\n${USAGE}` })
  const hosts = (list(values.hosts) ?? []).map((item) => hostSpec(item, values.interface))
  const { initCluster } = await import("./ClusterInit.js")
  const config = await initCluster({
    out: values.out,
    name: values.name,
    hosts,
    drivers: list(values.drivers) ?? [],
    port: count("port", values.port, 1),
    postgres: { ...endpoint(values.postgres ?? hosts[0]?.address ?? "", 5432), database: values.database, user: values.user },
    days: count("days", values.days, 1),
  })
  console.log(`wrote cluster ${config.name} to ${config.file}: ${config.hosts.length} hosts, ${config.drivers.length} drivers, certificates valid until ${config.hosts[0]!.validTo.toISOString()}`)
}

const node = async (args: ReadonlyArray<string>): Promise<void> => {
  const { values } = usage(() => parseArgs({ args: [...args], options: { config: { type: "string" }, name: { type: "string" } } }))
  if (values.config === undefined || values.name === undefined) throw new UsageError({ message: `node needs --config and --name\n${USAGE}` })
  const running = await startNode({ config: values.config, name: values.name })
  console.log(`tensorlane node ${running.host.name} listening on ${running.host.address}:${running.host.port}`)
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"))
    process.once("SIGINT", () => resolve("SIGINT"))
  })
  await running.close()
  console.log(`tensorlane node ${running.host.name} ended (${signal})`)
}

/** Runs the command; its exit code (0 unless it says otherwise). */
const main = async (argv: ReadonlyArray<string>): Promise<number | void> => {
  const [command, ...rest] = argv
  if (command === "doctor") return doctor(rest)
  if (command === "bench") return bench(rest)
  if (command === "build") return build(rest)
  if (command === "install") return install(rest)
  if (command === "cluster") return cluster(rest)
  if (command === "node") return node(rest)
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    console.log(USAGE)
    return
  }
  throw new UsageError({ message: `unknown command "${command}"\n${USAGE}` })
}

main(process.argv.slice(2)).then(
  // Actor processes and native threads are gone once the cluster shut down; exit without waiting for stray handles.
  (code) => process.exit(code ?? 0),
  (error: unknown) => {
    if (error instanceof UsageError || error instanceof BenchTransportError || error instanceof BuildError) {
      console.error(`${error._tag}: ${error.message}`)
      process.exit(2)
    }
    // An install that failed, a config or certificate that is not right: what and where is all there is to say.
    if ([DownloadError, WheelHashError, UnsafeWheelError, DiskFullError, PackageMissingError, ClusterConfigError, CertificateError].some((type) => error instanceof type)) {
      console.error(`${(error as { _tag: string })._tag}: ${(error as Error).message}`)
      process.exit(1)
    }
    const tag = typeof error === "object" && error !== null && "_tag" in error ? `${String((error as { _tag: unknown })._tag)}: ` : ""
    console.error(`${tag}${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    process.exit(1)
  },
)
