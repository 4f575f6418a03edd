/** `tensorlane bench` with a small size set on this machine, its outputs, and its refusals. */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { hostMemoryWarmCalls } from "@tensorlane/core"
import { afterAll, describe, expect, it } from "vitest"
import type { BenchResult } from "../src/Bench.ts"
import { tensorlane } from "./cli.ts"

const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-cli-bench-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** Every tag closed in order, so that the file parses as XML (a browser shows nothing otherwise). */
const balancedTags = (svg: string): boolean => {
  const open: Array<string> = []
  for (const [, closing, name, selfClosing] of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    if (selfClosing === "/") continue
    if (closing === "") open.push(name)
    else if (open.pop() !== name) return false
  }
  return open.length === 0
}

describe("tensorlane bench", () => {
  it("runs object-store, gloo and nixl at 4 KiB and 1 MiB in the three loops, cold and warm, prints the tables and writes JSON and SVG", async () => {
    const json = join(dir, "bench.json")
    const svg = join(dir, "bench.svg")
    const { code, stdout, stderr } = await tensorlane([
      "bench",
      "--transports", "object-store,gloo,nixl",
      "--sizes", "4KiB,1MiB",
      "--repeats", "3",
      "--min-time-ms", "0",
      "--json", json,
      "--svg", svg,
    ])
    expect(stderr).toBe("") // stderr is not a terminal here: no progress bar
    expect(code).toBe(0)
    expect(stdout).toMatch(/^tensorlane bench: 3 repeats after 2 warm-ups, node v\d+/m)
    for (const transport of ["object-store", "gloo", "nixl"]) {
      for (const size of ["4 KiB", "1 MiB"]) {
        for (const loop of ["released", "natural", "held"]) expect(stdout).toMatch(new RegExp(`^\\| ${transport} \\| ${loop} \\| ${size} \\| \\d+\\.\\d{2} \\|`, "m"))
        expect(stdout).toMatch(new RegExp(`^\\| ${transport} \\| ${size} \\|( \\d+\\.\\d{2} \\|){5}$`, "m"))
      }
    }
    // Each raw library beside its own transport's rows only.
    expect(stdout).toMatch(/^\| gloo \| natural \| 1 MiB \| [\d.]+ \| \d+ \|( [\d.]+%? \|){6} [\d.]+ \| [\d.]+% \|  \|  \|$/m)
    expect(stdout).toMatch(/^\| nixl \| natural \| 1 MiB \| [\d.]+ \| \d+ \|( [\d.]+%? \|){6}  \|  \| [\d.]+ \| [\d.]+% \|$/m)
    expect(stdout).toMatch(/^message ring, a reference for a call's four messages \(.*, a 4 KiB value in two of them\): median \d+\.\d{3} ms, \d+ of 3 runs \(\d+\.\d%\) over twice the median$/m)
    expect(stdout).toMatch(/^cold: a fresh cluster per row, how long it took to be ready \(start\(\) with every transport of the run, .*\) and its first 10 calls/m)

    const result = JSON.parse(fs.readFileSync(json, "utf8")) as BenchResult
    expect(result).toMatchObject({
      repeats: 3,
      warmups: 2,
      steadyCalls: [32, hostMemoryWarmCalls(1 << 20)],
      minTimeMs: 0,
      actorEnv: { producer: {}, consumer: {} },
      sizes: [4096, 1 << 20],
      loops: ["released", "natural", "held"],
      transports: ["object-store", "gloo", "nixl"],
    })
    // --repeats 3 and --min-time-ms 0: the ring's three timed round trips, as a cell's.
    const ring = result.ring!
    expect(ring.samplesMs).toHaveLength(3)
    const ringSorted = [...ring.samplesMs].sort((a, b) => a - b)
    expect(ringSorted[0]).toBeGreaterThan(0)
    expect(ring.medianMs).toBe(ringSorted[1])
    expect(ring.overTwiceMedian).toBe(ringSorted.filter((x) => x > 2 * ringSorted[1]).length)
    expect(result.rows).toHaveLength(18)
    expect(result.cold).toHaveLength(6)
    for (const cold of result.cold) {
      expect(cold.samplesMs).toHaveLength(10)
      // Two actor processes started and answering cannot take less than a few milliseconds.
      expect(cold.readyMs).toBeGreaterThan(5)
      const sorted = [...cold.samplesMs].sort((a, b) => a - b)
      expect(cold.medianMs).toBe((sorted[4] + sorted[5]) / 2)
    }
    for (const row of result.rows) {
      expect(row.samplesMs).toHaveLength(3)
      const sorted = [...row.samplesMs].sort((a, b) => a - b)
      expect(row.medianMs).toBe(sorted[1])
      expect(row.overTwiceMedian).toBe(sorted.filter((x) => x > 2 * sorted[1]).length)
      expect(row.gbps).toBeCloseTo(row.bytes / row.medianMs / 1e6, 9)
      const limits = result.limits.find((l) => l.bytes === row.bytes)!
      expect(row.memcpyRatio).toBeCloseTo(limits.memcpyMs / row.medianMs, 9)
      expect(row.tcpRatio).toBeCloseTo(limits.tcpMs / row.medianMs, 9)
      if (row.transport === "gloo") expect(row.rawGlooRatio).toBeCloseTo(limits.rawGlooMs! / row.medianMs, 9)
      else expect(row.rawGlooRatio).toBeUndefined()
      if (row.transport === "nixl") expect(row.rawNixlRatio).toBeCloseTo(limits.rawNixlMs! / row.medianMs, 9)
      else expect(row.rawNixlRatio).toBeUndefined()
    }
    // Every call past 64 KiB moves its tensor, inside the call's time; values this small travel inside
    // the result's message, whatever the transport: no transfer of their own.
    for (const row of result.rows) {
      if (row.bytes > 64 * 1024) {
        expect(row.transferMs, `${row.transport} ${row.bytes}`).toBeGreaterThan(0)
        expect(row.transferMs!).toBeLessThan(row.medianMs)
      } else expect(row.transferMs, `${row.transport} ${row.bytes}`).toBeUndefined()
    }
    for (const limits of result.limits) {
      expect(limits.memcpyMs).toBeGreaterThan(0)
      expect(limits.tcpMs).toBeGreaterThan(0)
      // 3 just before the cells of its transport and 3 just after them.
      for (const [ms, samples] of [[limits.rawGlooMs, limits.rawGlooSamplesMs], [limits.rawNixlMs, limits.rawNixlSamplesMs]] as const) {
        expect(ms).toBeGreaterThan(0)
        expect(samples).toHaveLength(6)
        const sorted = [...samples!].sort((a, b) => a - b)
        expect(ms).toBe((sorted[2] + sorted[3]) / 2)
      }
    }

    const chart = fs.readFileSync(svg, "utf8")
    expect(chart.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(balancedTags(chart)).toBe(true)
    // One line per transport and per limit, each named in the legend.
    expect(chart.match(/<polyline /g)).toHaveLength(7)
    for (const name of ["object-store", "gloo", "nixl", "memcpy", "TCP loopback", "raw Gloo", "raw NIXL"]) expect(chart).toContain(`>${name}</text>`)
  })

  it("refuses malformed sizes and counts, unknown commands and options, with a UsageError", async () => {
    for (const args of [
      ["bench", "--sizes", "4KB"],
      ["bench", "--sizes", "6B"],
      ["bench", "--repeats", "0"],
      ["bench", "--warmups", "x"],
      ["bench", "--size", "4KiB"],
      ["bench", "--producer-env", "=1"],
      ["bench", "--consumer-env", "NO_VALUE"],
      ["bench", "--loops", "leaked"],
      ["bench", "--loops", ","],
      ["bench", "--transports", ","],
      ["bench", "--transports", "gloo,gloo"],
      ["bench", "--json", "/nonexistent/folder/bench.json"],
      ["bench", "--svg", "/"],
      ["frobnicate"],
    ]) {
      const { code, stderr } = await tensorlane(args)
      expect(code, args.join(" ")).toBe(2)
      expect(stderr).toMatch(/^UsageError: /)
    }
  })

  it("gives each actor process its --producer-env / --consumer-env, and names them in the table", async () => {
    const args = ["bench", "--transports", "gloo", "--sizes", "4KiB", "--repeats", "1", "--warmups", "0", "--min-time-ms", "0"]
    const pinned = await tensorlane([...args, "--producer-env", "TENSORLANE_GLOO_DEVICE_CPUS=0", "--consumer-env", "TENSORLANE_GLOO_DEVICE_CPUS=0"])
    expect(pinned.code).toBe(0)
    expect(pinned.stdout).toMatch(/; producer TENSORLANE_GLOO_DEVICE_CPUS=0; consumer TENSORLANE_GLOO_DEVICE_CPUS=0\n/)
    // Only the consumer's process gets a value its gloo device refuses: the group cannot be made.
    const refused = await tensorlane([...args, "--consumer-env", "TENSORLANE_GLOO_DEVICE_CPUS=x"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^InvalidSettingError: .*TENSORLANE_GLOO_DEVICE_CPUS must be a list of CPUs \(like 1 or 0,2-3\), or all, got "x"/)
    // A typed error's message says it all: no stack.
    expect(refused.stderr).not.toMatch(/\n\s+at /)
  })

  it("refuses a transport that is not ready here, and names the doctor", async () => {
    const { code, stderr } = await tensorlane(["bench", "--transports", "nccl", "--sizes", "4KiB"])
    expect(code).toBe(2)
    expect(stderr).toMatch(/^BenchTransportError: transport nccl \(@tensorlane\/transport-nccl\) is not ready here: (not installed|no GPU).*tensorlane doctor/)
  })

  it("an unknown transport name fails before any actor starts, with core's list of the registered ones", async () => {
    const { code, stderr } = await tensorlane(["bench", "--transports", "object-store,carrier-pigeon", "--sizes", "4KiB", "--repeats", "1", "--warmups", "0"])
    expect(code).toBe(2)
    expect(stderr).toMatch(/^BenchTransportError: --transports carrier-pigeon: unknown tensor transport "carrier-pigeon".*object-store/)
    expect(stderr).not.toMatch(/\n\s+at /)
  })
})
