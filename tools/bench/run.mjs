#!/usr/bin/env node
// The tensorlane benchmark (DESIGN §5): submit to result of consumer.numel(producer.make(n)), actor to
// actor, per transport and size; medians after warm-ups; GB/s and ratios to limits measured in this run.
//   node --expose-gc tools/bench/run.mjs [--transports object-store,gloo] [--modules @tensorlane/transport-gloo]
//     [--sizes 4KiB,1MiB,64MiB,256MiB] [--repeats 7] [--warmups 2] [--json out.json]
import * as fs from "node:fs"
import { parseArgs } from "node:util"
import { start } from "@tensorlane/core"
import { Consumer, Producer } from "./actors.mjs"
import { median, memcpyMs, tcpLoopbackMs } from "./limits.mjs"

const { values } = parseArgs({
  options: {
    transports: { type: "string", default: "object-store" },
    sizes: { type: "string", default: "4KiB,1MiB,64MiB,256MiB" },
    repeats: { type: "string", default: "7" },
    warmups: { type: "string", default: "2" },
    modules: { type: "string", default: "" },
    json: { type: "string" },
  },
})

const units = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }
const parseSize = (s) => {
  const m = /^(\d+)(B|KiB|MiB|GiB)$/.exec(s.trim())
  if (!m) throw new Error(`size "${s}": write it like 4KiB, 64MiB`)
  return Number(m[1]) * units[m[2]]
}
const label = (n) => (n >= units.MiB ? `${n / units.MiB} MiB` : `${n / units.KiB} KiB`)
const sizes = values.sizes.split(",").map(parseSize)
const transports = values.transports.split(",")
const repeats = Number(values.repeats)
const warmups = Number(values.warmups)
const gbps = (bytes, ms) => bytes / ms / 1e6

// Raw Gloo (the addon alone, one-way between two processes) is the limit of the gloo rows.
const rawGloo = new Map()
if (transports.includes("gloo")) {
  const { measureRawSend } = await import("@tensorlane/transport-gloo/bench/raw-send")
  for (const r of (await measureRawSend({ sizes, warmups, repeats })).results) rawGloo.set(r.bytes, r.medianMs)
}

const cluster = await start({ transports: values.modules ? values.modules.split(",") : [] })
const rows = []
try {
  const [producer] = await cluster.spawn(Producer)
  const [consumer] = await cluster.spawn(Consumer)
  const groups = []
  for (const transport of transports) {
    const capabilities = cluster.runtime.transport(transport).capabilities
    if (capabilities.needsGroup) groups.push(await cluster.createCollectiveGroup([producer, consumer], { backend: transport }))
  }
  for (const bytes of sizes) {
    const memcpy = memcpyMs(bytes, repeats, warmups)
    const tcp = await tcpLoopbackMs(bytes, repeats, warmups)
    for (const transport of transports) {
      const times = []
      for (let i = 0; i < warmups + repeats; i++) {
        const t0 = performance.now()
        const made = producer.make.options({ tensorTransport: transport })(bytes)
        const counted = consumer.numel(made)
        const numel = await cluster.get(counted)
        const ms = performance.now() - t0
        made.release()
        counted.release()
        if (numel !== bytes / 4) throw new Error(`consumer saw ${numel} elements, expected ${bytes / 4}`)
        if (i >= warmups) times.push(ms)
        process.stderr.write(`\r${transport} ${label(bytes)} ${i + 1}/${warmups + repeats}   `)
      }
      const ms = median(times)
      const raw = transport === "gloo" ? rawGloo.get(bytes) : undefined
      rows.push({
        transport,
        bytes,
        medianMs: ms,
        gbps: gbps(bytes, ms),
        memcpyMs: memcpy,
        memcpyRatio: memcpy / ms,
        tcpMs: tcp,
        tcpRatio: tcp / ms,
        ...(raw !== undefined ? { rawGlooMs: raw, rawGlooRatio: raw / ms } : {}),
      })
    }
  }
  process.stderr.write("\r" + " ".repeat(40) + "\r")
  for (const group of groups) await group.destroy()
} finally {
  await cluster.shutdown()
}

const fmt = (x, d = 2) => x.toFixed(d)
console.log(`tensorlane bench: ${repeats} repeats after ${warmups} warm-ups, node ${process.version}, ${new Date().toISOString()}`)
console.log("| transport | size | median ms | GB/s | memcpy ms | vs memcpy | TCP loopback ms | vs TCP | raw Gloo ms | vs raw Gloo |")
console.log("|---|---|---|---|---|---|---|---|---|---|")
for (const r of rows) {
  const raw = r.rawGlooMs === undefined ? "| | " : `| ${fmt(r.rawGlooMs)} | ${fmt(r.rawGlooRatio * 100, 1)}% `
  console.log(
    `| ${r.transport} | ${label(r.bytes)} | ${fmt(r.medianMs)} | ${fmt(r.gbps)} | ${fmt(r.memcpyMs, 3)} | ${fmt(r.memcpyRatio * 100, 1)}% | ${fmt(r.tcpMs)} | ${fmt(r.tcpRatio * 100, 1)}% ${raw}|`,
  )
}
if (values.json) fs.writeFileSync(values.json, JSON.stringify({ repeats, warmups, node: process.version, rows }, null, 2))
