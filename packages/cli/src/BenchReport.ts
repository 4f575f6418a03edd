/** The benchmark's tables, as Markdown so that they paste into a README: warm cells, then cold calls. */
import { type BenchResult, COLD_CALLS } from "./Bench.js"
import { RING_VALUE_BYTES } from "./Limits.js"
import { formatSize } from "./Sizes.js"

const fixed = (x: number, digits = 2): string => x.toFixed(digits)
const percent = (ratio: number): string => `${(ratio * 100).toFixed(1)}%`

/** The share of a raw TCP stream between the same two hosts that a transport across hosts is to reach, at the largest size. */
export const ACROSS_HOSTS_BAR = 0.7

/** What the TCP limit of a run is: loopback, or the stream between its two hosts. */
export const tcpLabel = (result: BenchResult): string => (result.across ? `TCP ${result.across.producer} -> ${result.across.consumer}` : "TCP loopback")

export const formatTable = (result: BenchResult): string => {
  const limits = new Map(result.limits.map((l) => [l.bytes, l]))
  const runs = result.rows.map((r) => r.samplesMs.length)
  const timed =
    result.minTimeMs > 0
      ? `${Math.min(...runs)} to ${Math.max(...runs)} timed runs per cell (at least ${result.repeats} and ${result.minTimeMs} ms)`
      : `${result.repeats} repeats`
  const env = (role: "producer" | "consumer") =>
    Object.entries(result.actorEnv[role]).map(([name, value]) => `; ${role} ${name}=${value}`).join("")
  const lines = [
    `tensorlane bench: ${timed} after ${result.warmups} warm-ups, node ${result.node}, ${result.host.cpus} CPUs, ${result.date}${env("producer")}${env("consumer")}`,
    `| transport | loop | size | median ms | runs > 2x median | transfer ms | GB/s | memcpy ms | vs memcpy | ${tcpLabel(result)} ms | vs TCP | raw Gloo ms | vs raw Gloo | raw NIXL ms | vs raw NIXL |`,
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for (const r of result.rows) {
    const l = limits.get(r.bytes)
    const raw = (ms: number | undefined, ratio: number | undefined) => (ms !== undefined && ratio !== undefined ? `${fixed(ms)} | ${percent(ratio)}` : " | ")
    lines.push(
      `| ${r.transport} | ${r.loop} | ${formatSize(r.bytes)} | ${fixed(r.medianMs)} | ${r.overTwiceMedian} | ${r.transferMs !== undefined ? fixed(r.transferMs) : ""} | ${fixed(r.gbps)} | ${fixed(l?.memcpyMs ?? NaN, 3)} | ${percent(r.memcpyRatio)} | ${fixed(l?.tcpMs ?? NaN)} | ${percent(r.tcpRatio)} | ${raw(l?.rawGlooMs, r.rawGlooRatio)} | ${raw(l?.rawNixlMs, r.rawNixlRatio)} |`,
    )
  }
  if (result.ring !== undefined) {
    const { medianMs, samplesMs, overTwiceMedian } = result.ring
    lines.push(
      "",
      `message ring, a reference for a call's four messages (driver -> producer -> driver -> consumer -> driver between plain Node processes, a ${formatSize(RING_VALUE_BYTES)} value in two of them): median ${fixed(medianMs, 3)} ms, ${overTwiceMedian} of ${samplesMs.length} runs (${percent(overTwiceMedian / samplesMs.length)}) over twice the median`,
    )
  }
  if (result.cold.length > 0) {
    lines.push(
      "",
      `cold: a fresh cluster per row, how long it took to be ready (start() with every transport of the run, its two actors spawned, a group for each transport that needs one) and its first ${COLD_CALLS} calls, natural loop, beside the warm median`,
      "| transport | size | cluster ready ms | 1st call ms | cold median ms | cold max ms | warm median ms |",
      "|---|---|---|---|---|---|---|",
    )
    for (const c of result.cold) {
      // The warm figure of the same work: natural, else released (a held call has no fill).
      const warm = (["natural", "released"] as const).map((loop) => result.rows.find((r) => r.transport === c.transport && r.bytes === c.bytes && r.loop === loop)).find((r) => r !== undefined)
      lines.push(
        `| ${c.transport} | ${formatSize(c.bytes)} | ${c.readyMs !== undefined ? fixed(c.readyMs) : ""} | ${fixed(c.samplesMs[0])} | ${fixed(c.medianMs)} | ${fixed(Math.max(...c.samplesMs))} | ${warm !== undefined ? fixed(warm.medianMs) : ""} |`,
      )
    }
  }
  if (result.across !== undefined) {
    const largest = Math.max(...result.sizes)
    for (const r of result.rows.filter((row) => row.bytes === largest)) {
      lines.push(
        `${r.transport} (${r.loop} loop) ${result.across.producer} -> ${result.across.consumer} at ${formatSize(largest)}: ${percent(r.tcpRatio)} of a raw TCP stream between the same hosts (bar ${percent(ACROSS_HOSTS_BAR)}: ${r.tcpRatio >= ACROSS_HOSTS_BAR ? "met" : "NOT met"})`,
      )
    }
  }
  return lines.join("\n")
}
