/** `tensorlane bench`: its usage, its command line, and the run that prints the table and writes the JSON and the chart. */
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { count, list, parseCommandLine, usageError } from "./Args.js"
import { type BenchOptions, LOOPS, type Loop, runBench } from "./Bench.js"
import { formatTable } from "./BenchReport.js"
import { UsageError } from "./Errors.js"
import { progressBar } from "./ProgressBar.js"
import { parseSizes } from "./Sizes.js"
import { renderSvg } from "./SvgChart.js"

export const BENCH_USAGE = `  tensorlane bench [--transports object-store,gloo,nixl] [--sizes 4KiB,1MiB,64MiB,256MiB] [--repeats 21]
                   [--loops released,natural,held] [--min-time-ms 1000] [--warm-ms <ms>] [--warmups 2] [--modules <specifier,...>]
                   [--json <file>] [--svg <file>] [--producer-env NAME=value ...] [--consumer-env NAME=value ...]
      times consumer.numel(producer.make(n)) actor to actor, submit to result, where the producer
      returns n bytes of float32 ones: the median of at least --repeats timed runs per transport,
      size and loop, more until they add up to --min-time-ms, each cell first run untimed for
      --warm-ms (default --min-time-ms; four times that at the first size, for V8 to optimise; a
      natural cell on until the driver has collected twice in it, at most 30 s),
      next to memcpy, TCP loopback, raw Gloo, raw NIXL and a message ring of plain Node processes (the stalls
      the machine itself gives) measured in the same run; then the first 10 calls of a fresh cluster (cold) per transport
      and size; --loops: "released" releases both refs by hand, "natural" leaves them to the garbage
      collector, "held" releases them by hand and the producer returns the tensor it keeps (no fill
      in the call, as the limits have none); default transports: object-store and every CPU transport that doctor finds ready;
      --modules: more transport modules to load (your own transport);
      --producer-env / --consumer-env: an environment variable of that actor's process (repeatable)`

export const BENCH_HOSTS_USAGE = `  tensorlane bench --hosts <producer,consumer> --cluster <cluster.json> [--driver <name>] [options above]
      the same across two hosts of a cluster (their nodes running): the producer on the first host,
      the consumer on the second, next to a raw TCP stream between the same two hosts measured in
      the same run; default transport gloo; prints each transport's share of that stream at the
      largest size against the bar of 70%`

export interface BenchCommand {
  readonly options: BenchOptions
  /** Where to write the result as JSON, and its chart as SVG. */
  readonly json?: string
  readonly svg?: string
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

const loopsOf = (text: string): ReadonlyArray<Loop> => {
  const loops = list(text) ?? []
  const unknown = loops.find((loop) => !(LOOPS as ReadonlyArray<string>).includes(loop))
  if (unknown !== undefined || loops.length === 0) throw new UsageError({ message: `--loops ${text}: one or more of ${LOOPS.join(", ")} is needed` })
  return loops as ReadonlyArray<Loop>
}

/** The arguments after `bench`; a UsageError for an unknown option, a malformed value or options that go together alone. */
export const parseBenchArgs = (args: ReadonlyArray<string>, usage: string): BenchCommand => {
  const { values } = parseCommandLine(
    args,
    {
      options: {
        transports: { type: "string" },
        sizes: { type: "string", default: "4KiB,1MiB,64MiB,256MiB" },
        loops: { type: "string", default: LOOPS.join(",") },
        repeats: { type: "string", default: "21" },
        "min-time-ms": { type: "string", default: "1000" },
        "warm-ms": { type: "string" },
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
    },
    usage,
  )
  const hosts = list(values.hosts)
  if ((hosts === undefined) !== (values.cluster === undefined)) throw usageError("--hosts and --cluster go together", usage)
  if (hosts !== undefined && hosts.length !== 2) throw new UsageError({ message: `--hosts ${values.hosts}: two hosts are needed, producer,consumer` })
  if (values.driver !== undefined && hosts === undefined) throw usageError("--driver goes with --hosts and --cluster", usage)
  const transports = list(values.transports)
  if (transports !== undefined) {
    if (transports.length === 0) throw new UsageError({ message: `--transports ${values.transports}: one or more transport names are needed, like object-store,gloo` })
    const twice = transports.find((name, i) => transports.indexOf(name) !== i)
    if (twice !== undefined) throw new UsageError({ message: `--transports ${values.transports}: ${twice} is named twice` })
  }
  const options: BenchOptions = {
    transports,
    modules: list(values.modules) ?? [],
    sizes: parseSizes(values.sizes),
    loops: loopsOf(values.loops),
    repeats: count("repeats", values.repeats, 1),
    warmups: count("warmups", values.warmups, 0),
    minTimeMs: count("min-time-ms", values["min-time-ms"], 0),
    ...(values["warm-ms"] !== undefined ? { warmMs: count("warm-ms", values["warm-ms"], 0) } : {}),
    actorEnv: { producer: environment("producer-env", values["producer-env"]), consumer: environment("consumer-env", values["consumer-env"]) },
    ...(hosts !== undefined && values.cluster !== undefined
      ? { across: { cluster: values.cluster, producer: hosts[0]!, consumer: hosts[1]!, ...(values.driver !== undefined ? { driver: values.driver } : {}) } }
      : {}),
  }
  return { options, ...(values.json !== undefined ? { json: values.json } : {}), ...(values.svg !== undefined ? { svg: values.svg } : {}) }
}

/** Runs the benchmark with a progress bar on stderr, prints its table and writes the files asked for. */
export const bench = async (command: BenchCommand): Promise<void> => {
  // A file that cannot be written fails now, not after a run of many minutes.
  for (const [option, path] of [["json", command.json], ["svg", command.svg]] as const) {
    if (path === undefined) continue
    try {
      if (!fs.existsSync(path)) fs.accessSync(nodePath.dirname(nodePath.resolve(path)), fs.constants.W_OK)
      else if (fs.statSync(path).isDirectory()) throw new Error("it is a folder")
      else fs.accessSync(path, fs.constants.W_OK)
    } catch (error) {
      throw new UsageError({ message: `--${option} ${path}: cannot write it (${(error as Error).message})` })
    }
  }
  const bar = progressBar()
  let result
  try {
    result = await runBench(command.options, bar.update)
  } finally {
    bar.done()
  }
  console.log(formatTable(result))
  if (command.json !== undefined) fs.writeFileSync(command.json, `${JSON.stringify(result, null, 2)}\n`)
  if (command.svg !== undefined) fs.writeFileSync(command.svg, renderSvg(result))
}
