/**
 * `tensorlane bench`: for each transport and size, the time from submitting
 * `consumer.numel(producer.make(n))` to its result, actor to actor (the producer returns n bytes of
 * float32 ones, the scenario Ray Direct Transport's figures are taken with); medians after
 * warm-ups; GB/s and ratios to limits measured in the same run (memcpy, TCP loopback, and raw Gloo
 * for the gloo rows).
 */
import * as os from "node:os"
import type { Cluster, ObjectRef, Tensor } from "@tensorlane/core"
import { listGpus, probePackage } from "./Doctor.js"
import { BenchTransportError } from "./Errors.js"
import { median, memcpyMs, tcpLoopbackMs } from "./Limits.js"
import { openRawGloo } from "./RawGloo.js"
import { makeTransferClock } from "./internal/TransferClock.js"
import { discoverPackages } from "./Packages.js"
import { formatSize } from "./Sizes.js"

export interface BenchOptions {
  /** Transport names; undefined: object-store and every CPU transport that is ready here. */
  readonly transports: ReadonlyArray<string> | undefined
  /** Extra transport modules to load (third-party transports), by specifier. */
  readonly modules: ReadonlyArray<string>
  readonly sizes: ReadonlyArray<number>
  readonly repeats: number
  readonly warmups: number
  /** Timed runs of a cell go on past `repeats` until they add up to this (see Scenario). */
  readonly minTimeMs: number
  /** Extra environment of each actor process (a transport's settings, such as TENSORLANE_GLOO_DEVICE_CPUS). */
  readonly actorEnv: ActorEnv
}

export interface ActorEnv {
  readonly producer: Readonly<Record<string, string>>
  readonly consumer: Readonly<Record<string, string>>
}

export interface BenchRow {
  readonly transport: string
  readonly bytes: number
  readonly medianMs: number
  readonly gbps: number
  /** Every timed repeat, in order. */
  readonly samplesMs: ReadonlyArray<number>
  readonly memcpyRatio: number
  readonly tcpRatio: number
  readonly rawGlooRatio?: number
  /**
   * Median over the timed runs of the time their transfer took, as the receiver timed it (from
   * posting its receive to holding the bytes); the rest of a run is the producer's method, the
   * messages between driver and actors, and the consumer's method. Undefined when no run transferred.
   */
  readonly transferMs?: number
}

export interface BenchLimits {
  readonly bytes: number
  readonly memcpyMs: number
  readonly tcpMs: number
  /** The median of raw Gloo's samples, taken just before and just after the gloo cell. */
  readonly rawGlooMs?: number
  readonly rawGlooSamplesMs?: ReadonlyArray<number>
}

export interface BenchResult {
  readonly date: string
  readonly node: string
  readonly host: { readonly platform: string; readonly cpus: number; readonly cpuModel: string; readonly memoryGiB: number }
  readonly repeats: number
  readonly warmups: number
  /** Calls of each size, all transports together, before its first timed run (warm-ups included). */
  readonly steadyCalls: number
  readonly minTimeMs: number
  readonly actorEnv: ActorEnv
  readonly transports: ReadonlyArray<string>
  readonly sizes: ReadonlyArray<number>
  readonly limits: ReadonlyArray<BenchLimits>
  readonly rows: ReadonlyArray<BenchRow>
}

/** Where the run is: steps done out of the total, and the one just done. */
export type Progress = (done: number, total: number, label: string) => void

export const gbps = (bytes: number, ms: number): number => bytes / ms / 1e6

/** The transports to run and the modules that register them; refuses transports that are not ready here. */
const resolveTransports = async (
  options: BenchOptions,
): Promise<{ readonly transports: ReadonlyArray<string>; readonly modules: ReadonlyArray<string> }> => {
  const hasGpu = listGpus().length > 0
  const { packages } = discoverPackages()
  const known = new Map(packages.map((found) => [found.field.transport, found]))
  const modules = new Set(options.modules)
  if (options.transports === undefined) {
    const transports = ["object-store"]
    for (const found of packages) {
      if (found.field.kind === "gpu" || (await probePackage(found, hasGpu)).state !== "ready") continue
      transports.push(found.field.transport)
      modules.add(found.packageName)
    }
    return { transports, modules: [...modules] }
  }
  for (const name of options.transports) {
    const found = known.get(name)
    if (found === undefined) continue // object-store, or a transport of one of `modules` (core names the registered ones if not)
    const report = await probePackage(found, hasGpu)
    if (report.state !== "ready") {
      throw new BenchTransportError({
        message: `transport ${name} (${found.packageName}) is not ready here: ${report.state}${
          report.reason !== undefined ? ` (${report.reason})` : ""
        }. Run \`tensorlane doctor\` for the details and the fix.`,
        transport: name,
      })
    }
    modules.add(found.packageName)
  }
  return { transports: options.transports, modules: [...modules] }
}

/** One timed path of the scenario: how the producer makes n bytes and how the consumer counts them. */
export interface Scenario {
  /** Names the path in errors (a transport, say). */
  readonly label: string
  readonly make: () => ObjectRef<Tensor>
  readonly consume: (made: ObjectRef<Tensor>) => ObjectRef<number>
  readonly bytes: number
  readonly repeats: number
  readonly warmups: number
  /**
   * Timed runs go on past `repeats` until they add up to this many ms (at most MAX_RUNS), so that
   * the median of a fast path is of its steady state: a fresh cluster's first tens of calls still
   * run code V8 has not optimised yet, about twice as slow.
   */
  readonly minTimeMs?: number
}

const MAX_RUNS = 1000
/** A pause before raw Gloo is timed, for what the actors do once idle after a cell (a garbage collection). */
const SETTLE_MS = 100
/**
 * Calls of a size before its first timed run, all transports together: core's host-memory cache
 * reaches its steady state (8 blocks of a size circulating) after about 30 calls of that size, and
 * every call before that may take fresh pages, whose faults cost more than the transfer.
 */
const STEADY_CALLS = 32

/**
 * The timed loop: submit to result of `consume(make())`, `warmups` runs first, each result checked
 * (n / 4 float32 elements). Returns the samples in ms; `onRun` hears of every run.
 */
export const timeScenario = async (cluster: Cluster, scenario: Scenario, onRun: (run: number) => void = () => {}): Promise<Array<number>> => {
  const samples: Array<number> = []
  let timedMs = 0
  const more = (run: number) =>
    run < scenario.warmups + scenario.repeats || (timedMs < (scenario.minTimeMs ?? 0) && samples.length < MAX_RUNS)
  for (let i = 0; more(i); i++) {
    const t0 = performance.now()
    const made = scenario.make()
    const counted = scenario.consume(made)
    const numel = await cluster.get(counted)
    const ms = performance.now() - t0
    made.release()
    counted.release()
    if (numel !== scenario.bytes / 4) throw new Error(`the consumer saw ${numel} elements over ${scenario.label}, ${scenario.bytes / 4} expected`)
    if (i >= scenario.warmups) {
      samples.push(ms)
      timedMs += ms
    }
    onRun(i + 1)
  }
  return samples
}

export const runBench = async (options: BenchOptions, progress: Progress = () => {}): Promise<BenchResult> => {
  const { transports, modules } = await resolveTransports(options)
  const { sizes, repeats, warmups, minTimeMs } = options
  // Loaded only now: `doctor` and argument errors work without core's runtime.
  const { start, transferSpanName } = await import("@tensorlane/core")
  const { Consumer, Producer } = await import("./internal/BenchActors.js")
  const perRun = warmups + repeats
  const total = sizes.length * ((transports.includes("gloo") ? 4 : 2) + transports.length * perRun)
  let done = 0
  const step = (label: string) => progress(++done, total, label)

  // Raw Gloo (the addon alone, one-way between two processes) is the limit of the gloo rows: one
  // connected pair for the run, measured just before and just after each gloo cell (rawAround).
  const rawGloo = transports.includes("gloo") ? await openRawGloo(warmups) : undefined

  const limits: Array<BenchLimits> = []
  const rows: Array<BenchRow> = []
  const transferClock = makeTransferClock(transferSpanName)
  const cluster = await start({ transports: [...modules], tracer: transferClock.tracer }).catch(async (error: unknown) => {
    await rawGloo?.close()
    throw error
  })
  try {
    const [producer] = await cluster.spawn(Producer, { env: options.actorEnv.producer })
    const [consumer] = await cluster.spawn(Consumer, { env: options.actorEnv.consumer })
    const groups = []
    for (const transport of transports) {
      if (cluster.runtime.transport(transport).capabilities.needsGroup) {
        groups.push(await cluster.createCollectiveGroup([producer, consumer], { backend: transport }))
      }
    }
    for (const bytes of sizes) {
      const memcpy = memcpyMs(bytes, repeats, warmups)
      step(`memcpy ${formatSize(bytes)}`)
      const tcp = await tcpLoopbackMs(bytes, repeats, warmups)
      step(`TCP loopback ${formatSize(bytes)}`)
      const scenarioOf = (transport: string): Scenario => ({
        label: transport,
        make: () => producer.make.options({ tensorTransport: transport })(bytes),
        consume: (made) => consumer.numel(made),
        bytes,
        repeats,
        warmups: 0,
        minTimeMs,
      })
      // Warm-ups run before the first timed run of the size, one per transport in turn: each
      // transport's `warmups`, and more rounds until the size has been made STEADY_CALLS times. The
      // actors' host memory grows into a new size over its first calls (core's HostMemoryCache lets
      // one more block of it circulate after each collection, taking fresh pages meanwhile), which
      // is not to be charged to whichever transports come first.
      for (let round = 0, calls = 0; round < warmups || calls < STEADY_CALLS; round++) {
        for (const transport of transports) {
          await timeScenario(cluster, { ...scenarioOf(transport), warmups: 1, repeats: 0, minTimeMs: 0 })
          calls++
          if (round < warmups) step(`${transport} ${formatSize(bytes)} ${round + 1}/${perRun}`)
          else progress(done, total, `warming up ${formatSize(bytes)}: ${calls} calls`)
        }
      }
      const rawSamples: Array<number> = []
      const rawAround = async (when: string): Promise<void> => {
        if (rawGloo === undefined) return
        // The actors finish what they do once idle (a collection) before the pair is timed.
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
        rawSamples.push(...(await rawGloo.measure(bytes, repeats)))
        step(`raw Gloo ${formatSize(bytes)} ${when}`)
      }
      const rowFor = (transport: string, samples: Array<number>, transferred: Array<number>): BenchRow => {
        const ms = median(samples)
        const raw = transport === "gloo" && rawSamples.length > 0 ? median(rawSamples) : undefined
        return {
          transport,
          bytes,
          medianMs: ms,
          gbps: gbps(bytes, ms),
          samplesMs: samples,
          memcpyRatio: memcpy / ms,
          tcpRatio: tcp / ms,
          ...(raw !== undefined ? { rawGlooRatio: raw / ms } : {}),
          ...(transferred.some((t) => t > 0) ? { transferMs: median(transferred) } : {}),
        }
      }
      for (const transport of transports) {
        if (transport === "gloo") await rawAround("before")
        transferClock.take()
        const transferred: Array<number> = []
        const samples = await timeScenario(cluster, scenarioOf(transport), (timed) => {
          transferred.push(transferClock.take().reduce((sum, ms) => sum + ms, 0))
          // The bar moves over the first warmups + repeats runs; runs past them only show their count.
          const run = warmups + timed
          if (run <= perRun) step(`${transport} ${formatSize(bytes)} ${run}/${perRun}`)
          else progress(done, total, `${transport} ${formatSize(bytes)} ${run}`)
        })
        if (transport === "gloo") await rawAround("after")
        rows.push(rowFor(transport, samples, transferred))
      }
      limits.push({
        bytes,
        memcpyMs: memcpy,
        tcpMs: tcp,
        ...(rawSamples.length > 0 ? { rawGlooMs: median(rawSamples), rawGlooSamplesMs: rawSamples } : {}),
      })
    }
    for (const group of groups) await group.destroy()
  } finally {
    try {
      await cluster.shutdown()
    } finally {
      await rawGloo?.close()
    }
  }
  const cpus = os.cpus()
  return {
    date: new Date().toISOString(),
    node: process.version,
    host: {
      platform: `${process.platform} ${process.arch}`,
      cpus: cpus.length,
      cpuModel: cpus[0]?.model ?? "unknown",
      memoryGiB: Math.round(os.totalmem() / 1024 ** 3),
    },
    repeats,
    warmups,
    steadyCalls: STEADY_CALLS,
    minTimeMs,
    actorEnv: options.actorEnv,
    transports,
    sizes,
    limits,
    rows,
  }
}
