/** Sizes, the progress bar, the chart and the timed loop, without running a benchmark. */
import type { Cluster, ObjectRef, Tensor } from "@tensorlane/core"
import { describe, expect, it } from "vitest"
import { type BenchPair, type BenchResult, cellScenario, timeScenario } from "../src/Bench.ts"
import { UsageError } from "../src/Errors.ts"
import { Producer } from "../src/internal/BenchActors.ts"
import { progressBar } from "../src/ProgressBar.ts"
import { formatSize, parseSize, parseSizes } from "../src/Sizes.ts"
import { renderSvg } from "../src/SvgChart.ts"

describe("sizes", () => {
  it("reads whole numbers with B, KiB, MiB, GiB and prints them back", () => {
    expect(parseSizes("4KiB, 1MiB,256MiB,1GiB,8B")).toEqual([4096, 1 << 20, 256 << 20, 1 << 30, 8])
    expect([4096, 1 << 20, 3 << 20, 1 << 30, 12].map(formatSize)).toEqual(["4 KiB", "1 MiB", "3 MiB", "1 GiB", "12 B"])
  })
  it("refuses other units, zero, fractions and sizes that are not whole float32 elements", () => {
    for (const bad of ["4KB", "0KiB", "1.5MiB", "-4KiB", "", "6B"]) expect(() => parseSize(bad)).toThrow(UsageError)
  })
})

describe("progress bar", () => {
  const stream = (isTTY: boolean) => {
    const written: Array<string> = []
    return { written, stream: { isTTY, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream }
  }
  it("draws on a terminal and erases itself when done", () => {
    const { written, stream: s } = stream(true)
    const bar = progressBar(s)
    bar.update(1, 4, "gloo 4 KiB")
    bar.update(4, 4, "nixl 1 MiB")
    bar.done()
    expect(written[0]).toBe(`\r[${"#".repeat(8)}${".".repeat(22)}] 25% gloo 4 KiB`)
    expect(written[1]).toBe(`\r[${"#".repeat(30)}] 100% nixl 1 MiB`)
    expect(written[2]).toMatch(/^\r +\r$/)
  })
  it("writes nothing when the stream is not a terminal", () => {
    const { written, stream: s } = stream(false)
    const bar = progressBar(s)
    bar.update(1, 2, "x")
    bar.done()
    expect(written).toEqual([])
  })
})

describe("chart", () => {
  const result: BenchResult = {
    date: "2026-11-22T00:00:00.000Z",
    node: "v20.20.2",
    host: { platform: "linux x64", cpus: 2, cpuModel: "test", memoryGiB: 24 },
    repeats: 7,
    warmups: 2,
    steadyCalls: [32, 254],
    minTimeMs: 0,
    actorEnv: { producer: {}, consumer: {} },
    transports: ["a<b"],
    sizes: [4096, 1 << 20],
    loops: ["released", "natural"],
    limits: [
      { bytes: 4096, memcpyMs: 0.001, tcpMs: 0.1 },
      { bytes: 1 << 20, memcpyMs: 0.03, tcpMs: 1 },
    ],
    rows: [
      { transport: "a<b", loop: "released", bytes: 4096, medianMs: 2, gbps: 4096 / 2 / 1e6, samplesMs: [2], overTwiceMedian: 0, memcpyRatio: 0, tcpRatio: 0 },
      { transport: "a<b", loop: "natural", bytes: 4096, medianMs: 4, gbps: 4096 / 4 / 1e6, samplesMs: [4], overTwiceMedian: 0, memcpyRatio: 0, tcpRatio: 0 },
      { transport: "a<b", loop: "released", bytes: 1 << 20, medianMs: 5, gbps: (1 << 20) / 5 / 1e6, samplesMs: [5], overTwiceMedian: 0, memcpyRatio: 0, tcpRatio: 0 },
      { transport: "a<b", loop: "natural", bytes: 1 << 20, medianMs: 10, gbps: (1 << 20) / 10 / 1e6, samplesMs: [10], overTwiceMedian: 0, memcpyRatio: 0, tcpRatio: 0 },
    ],
    cold: [],
  }
  it("plots faster transfers higher, escapes names, and leaves out limits that were not measured", () => {
    const svg = renderSvg(result)
    expect(svg).toContain(">a&lt;b</text>")
    expect(svg).not.toContain("raw Gloo")
    expect(svg).not.toContain("raw NIXL")
    // One line per transport, of the first loop timed.
    expect(svg.match(/<polyline /g)).toHaveLength(3)
    const line = /<polyline fill="none" stroke="[^"]+" stroke-width="2" points="([^"]+)"/.exec(svg)!
    const [[x1, y1], [x2, y2]] = line[1].split(" ").map((p) => p.split(",").map(Number))
    expect(x2).toBeGreaterThan(x1)
    expect(y2).toBeLessThan(y1) // 0.21 GB/s at 1 MiB is above 0.002 GB/s at 4 KiB
  })
})

describe("the timed loop", () => {
  // TEST DOUBLE of a cluster and its refs: each run takes about 5 ms and counts one element; the
  // refs count their releases.
  const cluster = { get: () => new Promise((resolve) => setTimeout(() => resolve(1), 5)) } as unknown as Cluster
  let releases = 0
  const ref = { release: () => releases++ }
  const scenario = {
    label: "double",
    make: () => ref as unknown as ObjectRef<Tensor>,
    consume: () => ref as unknown as ObjectRef<number>,
    loop: "released" as const,
    bytes: 4,
    repeats: 3,
    warmups: 2,
  }
  const sum = (values: ReadonlyArray<number>) => values.reduce((a, b) => a + b, 0)

  it("times `repeats` runs after the warm-ups", async () => {
    const runs: Array<number> = []
    expect(await timeScenario(cluster, scenario, (run) => runs.push(run))).toHaveLength(3)
    expect(runs).toEqual([1, 2, 3, 4, 5])
  })

  it("releases both refs of a run in the released and held loops, and leaves them to the collector in the natural one", async () => {
    for (const [loop, released] of [["released", 2 * 5], ["held", 2 * 5], ["natural", 0]] as const) {
      releases = 0
      await timeScenario(cluster, { ...scenario, loop })
      expect(releases, loop).toBe(released)
    }
  })

  it("goes on past `repeats` until the timed runs add up to minTimeMs", async () => {
    // Far more than the 3 repeats take (about 5 ms each), even when one of them stalls.
    const samples = await timeScenario(cluster, { ...scenario, minTimeMs: 300 })
    expect(samples.length).toBeGreaterThan(3)
    expect(sum(samples)).toBeGreaterThanOrEqual(300)
    expect(sum(samples.slice(0, -1))).toBeLessThan(300)
  })
})

describe("the scenario's producer", () => {
  const { make, held, letGo } = Producer.spec.methods
  it("makes a new tensor of ones at each call, and hands out the one it keeps in the held loop until it lets go", () => {
    const state = { kept: new Map<number, Tensor>() }
    const made = make(state, 4096)
    expect(made).not.toBe(make(state, 4096))
    expect(made.sum()).toBe(1024)
    const kept = held(state, 1 << 20)
    expect(held(state, 1 << 20)).toBe(kept)
    expect(kept.numel).toBe(1 << 18)
    expect(kept.sum()).toBe(1 << 18)
    expect(held(state, 4096)).not.toBe(kept)
    letGo(state)
    expect(held(state, 1 << 20)).not.toBe(kept)
  })
})

describe("a cell's scenario", () => {
  // TEST DOUBLE of the scenario's actors: each method's handle records its calls and the options
  // they were sent with, and gives back a ref named after it.
  const calls: Array<string> = []
  const handle = (name: string) => ({
    options: (options: { readonly tensorTransport: string }) => (...args: ReadonlyArray<unknown>) => {
      calls.push(`${name}(${args.join(",")}) over ${options.tensorTransport}`)
      return name
    },
  })
  const direct = (name: string) => (...args: ReadonlyArray<unknown>) => {
    calls.push(`${name}(${args.join(",")})`)
    return name
  }
  const pair = {
    cluster: { get: async (ref: unknown) => calls.push(`get ${String(ref)}`) },
    producer: { make: handle("make"), held: handle("held"), letGo: direct("letGo") },
    consumer: { numel: direct("numel") },
  } as unknown as BenchPair

  it("makes a tensor in the released and natural loops, hands out the kept one in the held loop, and lets it go as the cell ends", async () => {
    for (const loop of ["released", "natural", "held"] as const) {
      calls.length = 0
      const scenario = cellScenario(pair, "gloo", 4096, loop, { repeats: 3, minTimeMs: 10 })
      expect(scenario).toMatchObject({ label: "gloo", loop, bytes: 4096, repeats: 3, warmups: 0, minTimeMs: 10 })
      scenario.consume(scenario.make())
      await scenario.end()
      const method = loop === "held" ? "held" : "make"
      expect(calls, loop).toEqual([`${method}(4096) over gloo`, `numel(${method})`, ...(loop === "held" ? ["letGo()", "get letGo"] : [])])
    }
  })
})
