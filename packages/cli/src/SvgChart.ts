/**
 * The benchmark as an SVG line chart, written by hand (no charting dependency): GB/s on a log scale
 * against the sizes, one solid line per transport and a dashed line per limit measured in the run.
 */
import type { BenchResult } from "./Bench.js"
import { gbps } from "./Bench.js"
import { tcpLabel } from "./BenchReport.js"
import { formatSize } from "./Sizes.js"

const WIDTH = 800
const HEIGHT = 460
const LEFT = 70
const RIGHT = 190
const TOP = 50
const BOTTOM = 60
const TRANSPORT_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
const LIMIT_COLORS = ["#555555", "#999999", "#bcbd22", "#17becf"]

interface Series {
  readonly name: string
  readonly color: string
  readonly dashed: boolean
  /** GB/s per size, in the order of `result.sizes`; undefined where not measured. */
  readonly values: ReadonlyArray<number | undefined>
}

const escapeXml = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const seriesOf = (result: BenchResult): ReadonlyArray<Series> => {
  const transports = result.transports.map((name, i) => ({
    name,
    color: TRANSPORT_COLORS[i % TRANSPORT_COLORS.length],
    dashed: false,
    // One loop per line: the first the run timed.
    values: result.sizes.map((bytes) => result.rows.find((r) => r.transport === name && r.bytes === bytes && r.loop === result.loops[0])?.gbps),
  }))
  const limit = (name: string, color: string, ms: (bytes: number) => number | undefined): Series => ({
    name,
    color,
    dashed: true,
    values: result.sizes.map((bytes) => {
      const t = ms(bytes)
      return t === undefined ? undefined : gbps(bytes, t)
    }),
  })
  const limitOf = (bytes: number) => result.limits.find((l) => l.bytes === bytes)
  const limits = [
    limit("memcpy", LIMIT_COLORS[0], (b) => limitOf(b)?.memcpyMs),
    limit(tcpLabel(result), LIMIT_COLORS[1], (b) => limitOf(b)?.tcpMs),
    limit("raw Gloo", LIMIT_COLORS[2], (b) => limitOf(b)?.rawGlooMs),
    limit("raw NIXL", LIMIT_COLORS[3], (b) => limitOf(b)?.rawNixlMs),
  ].filter((s) => s.values.some((v) => v !== undefined))
  return [...transports, ...limits]
}

export const renderSvg = (result: BenchResult): string => {
  const series = seriesOf(result)
  const values = series.flatMap((s) => s.values).filter((v): v is number => v !== undefined && v > 0 && Number.isFinite(v))
  const lo = Math.floor(Math.log10(Math.min(...values, 1)))
  const hi = Math.max(Math.ceil(Math.log10(Math.max(...values, 1))), lo + 1)
  const plotW = WIDTH - LEFT - RIGHT
  const plotH = HEIGHT - TOP - BOTTOM
  const n = result.sizes.length
  const x = (i: number) => LEFT + (n === 1 ? plotW / 2 : (i * plotW) / (n - 1))
  const y = (v: number) => TOP + plotH - ((Math.log10(v) - lo) / (hi - lo)) * plotH
  const out: Array<string> = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`)
  out.push(`<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`)
  out.push(
    `<text x="${LEFT}" y="22" font-size="15" font-weight="bold">${escapeXml(
      `tensorlane bench: GB/s actor to actor, submit to result (median of ${result.repeats})`,
    )}</text>`,
  )
  out.push(`<text x="${LEFT}" y="40" fill="#555">${escapeXml(`node ${result.node}, ${result.host.cpus} CPUs, ${result.date}`)}</text>`)
  for (let d = lo; d <= hi; d++) {
    const gy = y(10 ** d)
    out.push(`<line x1="${LEFT}" y1="${gy}" x2="${LEFT + plotW}" y2="${gy}" stroke="#ddd"/>`)
    out.push(`<text x="${LEFT - 8}" y="${gy + 4}" text-anchor="end">${String(Number((10 ** d).toPrecision(1)))}</text>`)
  }
  result.sizes.forEach((bytes, i) => {
    out.push(`<line x1="${x(i)}" y1="${TOP}" x2="${x(i)}" y2="${TOP + plotH}" stroke="#eee"/>`)
    out.push(`<text x="${x(i)}" y="${TOP + plotH + 18}" text-anchor="middle">${escapeXml(formatSize(bytes))}</text>`)
  })
  out.push(`<rect x="${LEFT}" y="${TOP}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`)
  out.push(`<text x="${LEFT + plotW / 2}" y="${HEIGHT - 14}" text-anchor="middle">tensor size</text>`)
  out.push(`<text transform="translate(18 ${TOP + plotH / 2}) rotate(-90)" text-anchor="middle">GB/s (log scale)</text>`)
  series.forEach((s, k) => {
    const points = s.values.flatMap((v, i) => (v !== undefined && v > 0 && Number.isFinite(v) ? [[x(i), y(v)] as const] : []))
    const dash = s.dashed ? ` stroke-dasharray="6 4"` : ""
    if (points.length > 1) {
      out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ")}"/>`)
    }
    for (const [px, py] of points) out.push(`<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="3.5" fill="${s.color}"/>`)
    const ly = TOP + 10 + k * 20
    const lx = LEFT + plotW + 16
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`)
    out.push(`<text x="${lx + 30}" y="${ly + 4}">${escapeXml(s.name)}</text>`)
  })
  out.push("</svg>")
  return `${out.join("\n")}\n`
}
