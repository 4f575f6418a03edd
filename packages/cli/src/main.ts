#!/usr/bin/env node
/**
 * The tensorlane command: `doctor`, `bench`, `build` and `install` (USAGE says what each does). Errors
 * of the command line print `<_tag>: <message>` and exit with 2; those of an install print the same
 * and exit with 1.
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { libraryCacheDir } from "@tensorlane/core/native"
import { runBench } from "./Bench.js"
import { formatTable } from "./BenchReport.js"
import { runBuild } from "./Build.js"
import { formatDoctor, runDoctor } from "./Doctor.js"
import { BenchTransportError, BuildError, DiskFullError, DownloadError, PackageMissingError, UnsafeWheelError, UsageError, WheelHashError } from "./Errors.js"
import { INSTALL_TARGETS, installWheel, targetWheels } from "./Install.js"
import { progressBar } from "./ProgressBar.js"
import { parseSizes } from "./Sizes.js"
import { renderSvg } from "./SvgChart.js"

const USAGE = `usage:
  tensorlane doctor [--json]
      every transport with its state, library versions and locations, the UCX transports NIXL sees
  tensorlane bench [--transports object-store,gloo,nixl] [--sizes 4KiB,1MiB,64MiB,256MiB] [--repeats 21]
                   [--min-time-ms 1000] [--warmups 2] [--modules <specifier,...>] [--json <file>] [--svg <file>]
                   [--producer-env NAME=value ...] [--consumer-env NAME=value ...]
      times consumer.numel(producer.make(n)) actor to actor, submit to result, where the producer
      returns n bytes of float32 ones: the median of at least --repeats timed runs per transport and
      size, more until they add up to --min-time-ms, next to memcpy, TCP loopback and raw Gloo
      measured in the same run; default transports: object-store and every CPU transport that
      doctor finds ready; --modules: more transport modules to load (your own transport);
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
      holding the wheel files, used instead of downloading them (a machine offline)`

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

/** Runs parseArgs, turning its errors (unknown option, missing value) into a UsageError. */
const usage = <A>(parse: () => A): A => {
  try {
    return parse()
  } catch (error) {
    throw new UsageError({ message: `${error instanceof Error ? error.message : String(error)}\n${USAGE}` })
  }
}

const doctor = async (args: ReadonlyArray<string>): Promise<void> => {
  const { values } = usage(() => parseArgs({ args: [...args], options: { json: { type: "boolean" } } }))
  const report = await runDoctor()
  console.log(values.json === true ? JSON.stringify(report, null, 2) : formatDoctor(report))
}

const bench = async (args: ReadonlyArray<string>): Promise<void> => {
  const { values } = usage(() =>
    parseArgs({
      args: [...args],
      options: {
        transports: { type: "string" },
        sizes: { type: "string", default: "4KiB,1MiB,64MiB,256MiB" },
        repeats: { type: "string", default: "21" },
        "min-time-ms": { type: "string", default: "1000" },
        warmups: { type: "string", default: "2" },
        modules: { type: "string" },
        json: { type: "string" },
        svg: { type: "string" },
        "producer-env": { type: "string", multiple: true },
        "consumer-env": { type: "string", multiple: true },
      },
    }),
  )
  const options = {
    transports: list(values.transports),
    modules: list(values.modules) ?? [],
    sizes: parseSizes(values.sizes),
    repeats: count("repeats", values.repeats, 1),
    warmups: count("warmups", values.warmups, 0),
    minTimeMs: count("min-time-ms", values["min-time-ms"], 0),
    actorEnv: { producer: environment("producer-env", values["producer-env"]), consumer: environment("consumer-env", values["consumer-env"]) },
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

const main = async (argv: ReadonlyArray<string>): Promise<void> => {
  const [command, ...rest] = argv
  if (command === "doctor") return doctor(rest)
  if (command === "bench") return bench(rest)
  if (command === "build") return build(rest)
  if (command === "install") return install(rest)
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    console.log(USAGE)
    return
  }
  throw new UsageError({ message: `unknown command "${command}"\n${USAGE}` })
}

main(process.argv.slice(2)).then(
  // Actor processes and native threads are gone once the cluster shut down; exit without waiting for stray handles.
  () => process.exit(0),
  (error: unknown) => {
    if (error instanceof UsageError || error instanceof BenchTransportError || error instanceof BuildError) {
      console.error(`${error._tag}: ${error.message}`)
      process.exit(2)
    }
    if ([DownloadError, WheelHashError, UnsafeWheelError, DiskFullError, PackageMissingError].some((type) => error instanceof type)) {
      console.error(`${(error as { _tag: string })._tag}: ${(error as Error).message}`)
      process.exit(1)
    }
    const tag = typeof error === "object" && error !== null && "_tag" in error ? `${String((error as { _tag: unknown })._tag)}: ` : ""
    console.error(`${tag}${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    process.exit(1)
  },
)
