/**
 * `tensorlane bench`: for each transport and size, the time from submitting
 * `consumer.numel(producer.make(n))` to its result, actor to actor (the producer returns n bytes of
 * float32 ones, the scenario Ray Direct Transport's figures are taken with); medians after
 * warm-ups, in the released loop (refs released by hand), in the natural one (refs left to the
 * garbage collector, as users write it) and in the held one (the producer returns the tensor it
 * keeps: no fill); the first calls of a fresh cluster apart (cold); GB/s and
 * ratios to limits measured in the same run (memcpy, TCP loopback, raw Gloo for the gloo rows and
 * raw NIXL for the nixl rows),
 * and the message ring under every call's messages.
 */
import * as os from "node:os"
import { type NodeGCPerformanceDetail, PerformanceObserver, constants } from "node:perf_hooks"
import type { ActorHandle, Cluster, ClusterConfig, ObjectRef, Tensor } from "@tensorlane/core"
import { listGpus, probePackage } from "./Doctor.js"
import { BenchTransportError, UsageError } from "./Errors.js"
import { type RingLimit, median, memcpyMs, messageRing, overTwiceMedian, tcpLoopbackMs } from "./Limits.js"
import { openRawGloo } from "./RawGloo.js"
import { openRawNixl } from "./RawNixl.js"
import type { Consumer, Producer } from "./internal/BenchActors.js"
import type { RawLimit } from "./internal/PeerLink.js"
import { makeTransferClock } from "./internal/TransferClock.js"
import { discoverPackages } from "./Packages.js"
import { formatSize } from "./Sizes.js"

export interface BenchOptions {
  /** Transport names; undefined: object-store and every CPU transport that is ready here. */
  readonly transports: ReadonlyArray<string> | undefined
  /** Extra transport modules to load (third-party transports), by specifier. */
  readonly modules: ReadonlyArray<string>
  readonly sizes: ReadonlyArray<number>
  /** The loops timed in each cell, in this order. */
  readonly loops: ReadonlyArray<Loop>
  readonly repeats: number
  readonly warmups: number
  /** Timed runs of a cell go on past `repeats` until they add up to this (see Scenario). */
  readonly minTimeMs: number
  /**
   * How long each cell first runs its loop untimed (`minTimeMs` where absent), a natural cell on
   * until the driver has collected twice in it (none where 0); the run's first size warms up
   * OPTIMISING_CELLS times as long.
   */
  readonly warmMs?: number
  /** Extra environment of each actor process (a transport's settings, such as TENSORLANE_GLOO_DEVICE_CPUS). */
  readonly actorEnv: ActorEnv
  /**
   * A run across hosts: the producer on one host of the cluster config, the consumer on another,
   * and the TCP limit a raw stream between those two hosts (the driver's machine only submits).
   */
  readonly across?: AcrossHosts
}

export interface AcrossHosts {
  readonly cluster: string
  readonly driver?: string
  readonly producer: string
  readonly consumer: string
}

export interface ActorEnv {
  readonly producer: Readonly<Record<string, string>>
  readonly consumer: Readonly<Record<string, string>>
}

/**
 * How a run gets its tensor and treats its refs: "released" releases both by hand once it has the
 * result; "natural" leaves them to the garbage collector, `await cluster.get(consumer.numel(producer.make(n)))`;
 * "held" releases them by hand too, but the producer returns the tensor it keeps (`producer.held(n)`,
 * as an actor hands out its weights): no fill in the call, what the transport costs against the
 * limits, which move buffers that exist already.
 */
export type Loop = "released" | "natural" | "held"

export const LOOPS: ReadonlyArray<Loop> = ["released", "natural", "held"]

export interface BenchRow {
  readonly transport: string
  readonly loop: Loop
  readonly bytes: number
  readonly medianMs: number
  readonly gbps: number
  /** Every timed repeat, in order. */
  readonly samplesMs: ReadonlyArray<number>
  /** Timed runs over twice the median: the stalls (collections, page faults) a median hides. */
  readonly overTwiceMedian: number
  readonly memcpyRatio: number
  readonly tcpRatio: number
  readonly rawGlooRatio?: number
  readonly rawNixlRatio?: number
  /**
   * Median over the timed runs of the time their transfer took, as the receiver timed it (from
   * posting its receive to holding the bytes); the rest of a run is the producer's method, the
   * messages between driver and actors, and the consumer's method. Undefined when no run transferred.
   */
  readonly transferMs?: number
}

/** The first COLD_CALLS calls of a fresh cluster (its actors just started), natural loop. */
export interface ColdRow {
  readonly transport: string
  readonly bytes: number
  /**
   * From `start()` (every transport of the run) to the producer and the consumer spawned and in their
   * groups: the cluster ready for its first call. Absent from the results of earlier versions.
   */
  readonly readyMs?: number
  readonly samplesMs: ReadonlyArray<number>
  readonly medianMs: number
}

export interface BenchLimits {
  readonly bytes: number
  readonly memcpyMs: number
  readonly tcpMs: number
  /** The median of raw Gloo's samples, taken just before and just after the gloo cell. */
  readonly rawGlooMs?: number
  readonly rawGlooSamplesMs?: ReadonlyArray<number>
  /** The same for raw NIXL, around the nixl cells. */
  readonly rawNixlMs?: number
  readonly rawNixlSamplesMs?: ReadonlyArray<number>
}

export interface BenchResult {
  readonly date: string
  readonly node: string
  readonly host: { readonly platform: string; readonly cpus: number; readonly cpuModel: string; readonly memoryGiB: number }
  readonly repeats: number
  readonly warmups: number
  /** Calls of each size (in the order of `sizes`), all transports together, before its first timed run (warm-ups included). */
  readonly steadyCalls: ReadonlyArray<number>
  readonly minTimeMs: number
  readonly actorEnv: ActorEnv
  readonly transports: ReadonlyArray<string>
  readonly sizes: ReadonlyArray<number>
  readonly loops: ReadonlyArray<Loop>
  readonly limits: ReadonlyArray<BenchLimits>
  /** The message ring (Limits.ts), measured once, before the first size's cells; none across hosts. */
  readonly ring?: RingLimit
  readonly rows: ReadonlyArray<BenchRow>
  readonly cold: ReadonlyArray<ColdRow>
  /** The hosts of a run across hosts, with their addresses; `tcpMs` is then the stream between them. */
  readonly across?: { readonly producer: string; readonly producerAddress: string; readonly consumer: string; readonly consumerAddress: string }
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
  readonly loop: Loop
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

/** A scenario as a cell of the run times it, with what the cell does once timed. */
export interface CellScenario extends Scenario {
  /** In the held loop, the producer lets go of the tensor it kept, which the cells after would miss from its cache. */
  readonly end: () => Promise<void>
}

/** The scenario's two actors (internal/BenchActors.ts), as spawned, and their cluster. */
export interface BenchPair {
  readonly cluster: Pick<Cluster, "get">
  readonly producer: ActorHandle<typeof Producer>
  readonly consumer: ActorHandle<typeof Consumer>
}

/** A cell's scenario: the producer's call for the loop (`held` hands out the tensor it keeps, the others make one), the consumer's count, and the cell's end. */
export const cellScenario = (
  { cluster, producer, consumer }: BenchPair,
  transport: string,
  bytes: number,
  loop: Loop,
  timing: { readonly repeats: number; readonly minTimeMs: number },
): CellScenario => ({
  label: transport,
  make: () => (loop === "held" ? producer.held : producer.make).options({ tensorTransport: transport })(bytes),
  consume: (made) => consumer.numel(made),
  loop,
  bytes,
  end: async () => {
    if (loop === "held") await cluster.get(producer.letGo())
  },
  repeats: timing.repeats,
  warmups: 0,
  minTimeMs: timing.minTimeMs,
})

/** The raw limits, by the transport whose rows they bound. */
const RAW_LIMITS: ReadonlyArray<{ readonly transport: string; readonly label: string; readonly open: (warmups: number) => Promise<RawLimit> }> = [
  { transport: "gloo", label: "raw Gloo", open: openRawGloo },
  { transport: "nixl", label: "raw NIXL", open: openRawNixl },
]

const MAX_RUNS = 1000
/** A pause before a raw library is timed, for what the actors do once idle after a cell (a garbage collection). */
const SETTLE_MS = 100
/**
 * Calls of a size before its first timed run, all transports together: at least this many, and as
 * many as core's host-memory cache takes to let its whole allowance of the size circulate
 * (`hostMemoryWarmCalls`: 254 at 1 MiB, 135 at 64 MiB by default), since every call before that may
 * take fresh pages, whose faults cost more than the transfer.
 */
const STEADY_CALLS = 32

/**
 * How many cells' time (`minTimeMs` each) the warm-ups at a run's first size last at least: V8
 * optimised the three processes' code only after about 4 s of 4 KiB calls (its first cell 0.60 ms
 * with none, 0.37 ms after 1 s, 0.24 ms after 4 s, like the cells after it).
 */
const OPTIMISING_CELLS = 4

/** Full collections of the driver a natural cell's untimed loop waits for, and for at most how long. */
const NATURAL_WARM_COLLECTIONS = 2
const NATURAL_WARM_MOST_MS = 30_000

/**
 * Runs `chunk` (at least once) until this process, the driver, has run `collections` full
 * collections since, or NATURAL_WARM_MOST_MS have passed (after the chunk running then).
 */
const untilCollections = async (collections: number, chunk: () => Promise<unknown>): Promise<void> => {
  let seen = 0
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as Array<{ readonly detail?: NodeGCPerformanceDetail }>) {
      if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) seen++
    }
  })
  observer.observe({ entryTypes: ["gc"] })
  try {
    const until = performance.now() + NATURAL_WARM_MOST_MS
    do {
      await chunk()
    } while (seen < collections && performance.now() < until)
  } finally {
    observer.disconnect()
  }
}

/** Calls timed on each fresh cluster for the cold rows. */
export const COLD_CALLS = 10

/** One run: its result, and its time from submit to result (a release by hand comes after it). */
const runOnce = async (cluster: Cluster, scenario: Scenario): Promise<{ readonly numel: number; readonly ms: number }> => {
  const t0 = performance.now()
  if (scenario.loop === "natural") {
    const numel = await cluster.get(scenario.consume(scenario.make()))
    return { numel, ms: performance.now() - t0 }
  }
  const made = scenario.make()
  const counted = scenario.consume(made)
  const numel = await cluster.get(counted)
  const ms = performance.now() - t0
  made.release()
  counted.release()
  return { numel, ms }
}

/**
 * The timed loop: submit to result of `consume(make())` in the scenario's loop, `warmups` runs first,
 * each result checked (n / 4 float32 elements). Returns the samples in ms; `onRun` hears of every run.
 */
export const timeScenario = async (cluster: Cluster, scenario: Scenario, onRun: (run: number) => void = () => {}): Promise<Array<number>> => {
  const samples: Array<number> = []
  let timedMs = 0
  const more = (run: number) =>
    run < scenario.warmups + scenario.repeats || (timedMs < (scenario.minTimeMs ?? 0) && samples.length < MAX_RUNS)
  for (let i = 0; more(i); i++) {
    const { numel, ms } = await runOnce(cluster, scenario)
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
  // Across hosts, by default the transport between hosts that every host has: gloo.
  const { transports, modules } = await resolveTransports(options.across !== undefined && options.transports === undefined ? { ...options, transports: ["gloo"] } : options)
  const { sizes, loops, repeats, warmups, minTimeMs } = options
  const warmMs = options.warmMs ?? minTimeMs
  // Loaded only now: `doctor` and argument errors work without core's runtime.
  const { hostMemoryWarmCalls, loadClusterConfig, start, transferSpanName } = await import("@tensorlane/core")
  const steadyCallsOf = (bytes: number): number => Math.max(STEADY_CALLS, hostMemoryWarmCalls(bytes))
  const { Consumer, Producer } = await import("./internal/BenchActors.js")
  const across = options.across === undefined ? undefined : placement(options.across, loadClusterConfig(options.across.cluster))
  // Raw Gloo and raw NIXL are pairs on this machine: no limits of a run across hosts.
  const rawTransports = across === undefined ? RAW_LIMITS.filter(({ transport }) => transports.includes(transport)) : []
  const total =
    (across === undefined ? 1 : 0) + sizes.length * (2 + 2 * rawTransports.length + transports.length * (warmups + COLD_CALLS) + transports.length * loops.length * repeats)
  let done = 0
  const step = (label: string) => progress(++done, total, label)
  const transferClock = makeTransferClock(transferSpanName)

  /**
   * A fresh cluster with the producer and the consumer, in a group of each transport that needs one:
   * `use` runs on it, then it shuts down. `tcpMs`: the TCP limit, over loopback here, or a raw stream
   * from the producer's host to the consumer's; `readyMs`: how long the cluster took to be ready.
   */
  const withPair = async <A>(
    use: (
      cluster: Cluster,
      scenarioOf: (transport: string, bytes: number, loop: Loop) => CellScenario,
      tcpMs: (bytes: number) => Promise<number>,
      readyMs: number,
    ) => Promise<A>,
  ): Promise<A> => {
    const t0 = performance.now()
    const cluster = await start({
      transports: [...modules],
      tracer: transferClock.tracer,
      ...(options.across !== undefined ? { cluster: options.across.cluster, ...(options.across.driver !== undefined ? { driver: options.across.driver } : {}) } : {}),
    })
    try {
      for (const transport of transports) {
        try {
          cluster.runtime.transport(transport)
        } catch (error) {
          throw new BenchTransportError({ message: `--transports ${transport}: ${(error as Error).message}`, transport })
        }
      }
      const [producer] = await cluster.spawn(Producer, { env: options.actorEnv.producer, ...(across ? { host: across.producer } : {}) })
      const [consumer] = await cluster.spawn(Consumer, { env: options.actorEnv.consumer, ...(across ? { host: across.consumer } : {}) })
      const tcpMs = async (bytes: number): Promise<number> => {
        if (across === undefined) return tcpLoopbackMs(bytes, repeats, warmups)
        const port = await cluster.get(consumer.tcpSink(across.consumerAddress, bytes))
        return cluster.get(producer.tcpStreamMs(across.consumerAddress, port, bytes, repeats, warmups))
      }
      const groups = []
      for (const transport of transports) {
        if (cluster.runtime.transport(transport).capabilities.needsGroup) {
          groups.push(await cluster.createCollectiveGroup([producer, consumer], { backend: transport }))
        }
      }
      const readyMs = performance.now() - t0
      const result = await use(cluster, (transport, bytes, loop) => cellScenario({ cluster, producer, consumer }, transport, bytes, loop, { repeats, minTimeMs }), tcpMs, readyMs)
      for (const group of groups) await group.destroy()
      return result
    } finally {
      await cluster.shutdown()
    }
  }

  // Cold: the first calls of a cluster whose actors just started (code not yet optimised, memory not
  // yet faulted in), what a short program sees; each transport and size on a cluster of its own.
  const cold: Array<ColdRow> = []
  for (const transport of transports) {
    for (const bytes of sizes) {
      const { readyMs, samplesMs } = await withPair(async (cluster, scenarioOf, _tcpMs, readyMs) => ({
        readyMs,
        samplesMs: await timeScenario(cluster, { ...scenarioOf(transport, bytes, "natural"), repeats: COLD_CALLS, minTimeMs: 0 }, (run) =>
          step(`cold ${transport} ${formatSize(bytes)} ${run}/${COLD_CALLS}`),
        ),
      }))
      cold.push({ transport, bytes, readyMs, samplesMs, medianMs: median(samplesMs) })
    }
  }

  // Raw Gloo and raw NIXL (each transport's addon alone, between two processes) are the limits of the
  // gloo and nixl rows: one pair each for the run, measured just before and just after each size's
  // cells of their transport (rawAround).
  const raws = new Map<string, { readonly label: string; readonly pair: RawLimit }>()
  const limits: Array<BenchLimits> = []
  const rows: Array<BenchRow> = []
  let ring: RingLimit | undefined
  try {
    for (const { transport, label, open } of rawTransports) raws.set(transport, { label, pair: await open(warmups) })
    await withPair(async (cluster, scenarioOf, tcpMs) => {
      for (const bytes of sizes) {
        const memcpy = memcpyMs(bytes, repeats, warmups)
        step(`memcpy ${formatSize(bytes)}`)
        const tcp = await tcpMs(bytes)
        step(`TCP ${across ? `${across.producer} -> ${across.consumer}` : "loopback"} ${formatSize(bytes)}`)
        // Warm-ups run before the first timed run of the size, one per transport in turn: each
        // transport's `warmups`, and more rounds until the size has been made steadyCallsOf(bytes) times. The
        // actors' host memory grows into a new size over its first calls (core's HostMemoryCache lets
        // more blocks of it circulate after each collection, taking fresh pages meanwhile), which
        // is not to be charged to whichever transports come first. Before the run's first size, they go
        // on for OPTIMISING_CELLS times warmMs as well: the processes' JavaScript is optimised over
        // its first few thousand calls, and the first cells timed would carry it (the cold table shows
        // a fresh cluster's calls).
        const optimisedBy = bytes === sizes[0] ? performance.now() + OPTIMISING_CELLS * warmMs : 0
        const steadyCalls = steadyCallsOf(bytes)
        for (let round = 0, calls = 0; round < warmups || calls < steadyCalls || performance.now() < optimisedBy; round++) {
          for (const transport of transports) {
            await timeScenario(cluster, { ...scenarioOf(transport, bytes, "released"), warmups: 1, repeats: 0, minTimeMs: 0 })
            calls++
            if (round < warmups) step(`${transport} ${formatSize(bytes)} warm-up ${round + 1}/${warmups}`)
            else progress(done, total, `warming up ${formatSize(bytes)}: ${calls} calls`)
          }
        }
        if (across === undefined && bytes === sizes[0]) {
          // Once the actors are warm and idle, as they are around every cell.
          ring = await messageRing(repeats, minTimeMs, MAX_RUNS)
          step("message ring")
        }
        const rawSamples = new Map<string, Array<number>>()
        const rawAround = async (transport: string, when: string): Promise<void> => {
          const raw = raws.get(transport)
          if (raw === undefined) return
          // The actors finish what they do once idle (a collection) before the pair is timed.
          await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
          rawSamples.set(transport, [...(rawSamples.get(transport) ?? []), ...(await raw.pair.measure(bytes, repeats))])
          step(`${raw.label} ${formatSize(bytes)} ${when}`)
        }
        const timed: Array<{ transport: string; loop: Loop; samples: Array<number>; transferred: Array<number> }> = []
        for (const transport of transports) {
          await rawAround(transport, "before")
          for (const loop of loops) {
            // The cell's own loop first runs untimed for as long as it is timed: in the natural loop the
            // producer holds the objects the driver has not collected yet, and their memory (a staging
            // heap's blocks, the host cache's) grows to its steady number over the first cycle, which
            // ends with a full collection of the driver (core's DroppedRefs: some 500 calls at 1 MiB,
            // each taking fresh pages). A natural cell warms on until its loop has seen two: the
            // first may end a cycle that the cell before it began.
            const warm = { ...scenarioOf(transport, bytes, loop), repeats: 0, minTimeMs: warmMs }
            const warming = () => progress(done, total, `${transport} ${loop} ${formatSize(bytes)} warming up`)
            if (loop === "natural" && warmMs > 0) await untilCollections(NATURAL_WARM_COLLECTIONS, () => timeScenario(cluster, warm, warming))
            else await timeScenario(cluster, warm, warming)
            transferClock.take()
            const transferred: Array<number> = []
            const scenario = scenarioOf(transport, bytes, loop)
            const samples = await timeScenario(cluster, scenario, (run) => {
              transferred.push(transferClock.take().reduce((sum, ms) => sum + ms, 0))
              // The bar moves over the first repeats runs; runs past them only show their count.
              if (run <= repeats) step(`${transport} ${loop} ${formatSize(bytes)} ${run}/${repeats}`)
              else progress(done, total, `${transport} ${loop} ${formatSize(bytes)} ${run}`)
            })
            await scenario.end()
            timed.push({ transport, loop, samples, transferred })
          }
          await rawAround(transport, "after")
        }
        const rawMs = (transport: string): number | undefined => {
          const samples = rawSamples.get(transport)
          return samples === undefined ? undefined : median(samples)
        }
        const rawGloo = rawMs("gloo")
        const rawNixl = rawMs("nixl")
        for (const { transport, loop, samples, transferred } of timed) {
          const ms = median(samples)
          rows.push({
            transport,
            loop,
            bytes,
            medianMs: ms,
            gbps: gbps(bytes, ms),
            samplesMs: samples,
            overTwiceMedian: overTwiceMedian(samples, ms),
            memcpyRatio: memcpy / ms,
            tcpRatio: tcp / ms,
            ...(transport === "gloo" && rawGloo !== undefined ? { rawGlooRatio: rawGloo / ms } : {}),
            ...(transport === "nixl" && rawNixl !== undefined ? { rawNixlRatio: rawNixl / ms } : {}),
            ...(transferred.some((t) => t > 0) ? { transferMs: median(transferred) } : {}),
          })
        }
        limits.push({
          bytes,
          memcpyMs: memcpy,
          tcpMs: tcp,
          ...(rawGloo !== undefined ? { rawGlooMs: rawGloo, rawGlooSamplesMs: rawSamples.get("gloo")! } : {}),
          ...(rawNixl !== undefined ? { rawNixlMs: rawNixl, rawNixlSamplesMs: rawSamples.get("nixl")! } : {}),
        })
      }
    })
  } finally {
    for (const { pair } of raws.values()) await pair.close()
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
    steadyCalls: sizes.map(steadyCallsOf),
    minTimeMs,
    actorEnv: options.actorEnv,
    transports,
    sizes,
    loops,
    limits,
    ...(ring !== undefined ? { ring } : {}),
    rows,
    cold,
    ...(across !== undefined ? { across } : {}),
  }
}

/** The two hosts of a run across hosts, checked against the config, with their addresses. */
const placement = (across: AcrossHosts, config: ClusterConfig) => {
  const address = (name: string) => {
    const host = config.hosts.find((h) => h.name === name)
    if (host === undefined) throw new UsageError({ message: `--hosts: ${name} is not a host of ${config.file} (its hosts: ${config.hosts.map((h) => h.name).join(", ")})` })
    return host.address
  }
  if (across.producer === across.consumer) throw new UsageError({ message: `--hosts: two different hosts are needed, got ${across.producer} twice` })
  return { producer: across.producer, producerAddress: address(across.producer), consumer: across.consumer, consumerAddress: address(across.consumer) }
}
