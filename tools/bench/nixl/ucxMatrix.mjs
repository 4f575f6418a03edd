/**
 * UCX settings against each other: runs `tensorlane bench --transports nixl --sizes 64MiB,4KiB`
 * (memcpy measured in the same run) under each setting, ROUNDS times interleaved (the machine's
 * speed drifts), and prints a Markdown row per setting with the best and worst median of the rounds,
 * plus whether UCX's own dead-peer detection stays on. UCX settings reach the actors through the
 * environment they inherit.
 *   npm run build, then node tools/bench/nixl/ucxMatrix.mjs  (ROUNDS=2)
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROUNDS = Number(process.env.ROUNDS ?? 2)
const cli = fileURLToPath(new URL("./main.js", import.meta.resolve("@tensorlane/cli")))
const out = join(fs.mkdtempSync(join(os.tmpdir(), "tensorlane-ucx-matrix-")), "bench.json")
const settings = [
  { name: "default transports, error mode peer (default)", env: {}, detects: "yes" },
  { name: "default transports, error mode none", env: { TENSORLANE_NIXL_ERROR_MODE: "none" }, detects: "no (UCX)" },
  { name: "UCX_TLS=cma,tcp, peer", env: { UCX_TLS: "cma,tcp" }, detects: "yes" },
  { name: "UCX_TLS=shm,tcp, peer", env: { UCX_TLS: "shm,tcp" }, detects: "yes" },
  { name: "UCX_TLS=tcp, peer", env: { UCX_TLS: "tcp" }, detects: "yes" },
  { name: "UCX_TLS=shm,self, none", env: { UCX_TLS: "shm,self", TENSORLANE_NIXL_ERROR_MODE: "none" }, detects: "no (UCX)" },
  { name: "UCX_TLS=shm,self, peer, UCX_MM_ERROR_HANDLING=y", env: { UCX_TLS: "shm,self", UCX_MM_ERROR_HANDLING: "y" }, detects: "yes" },
]

const results = new Map(settings.map((s) => [s.name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const setting of settings) {
    let rows
    try {
      execFileSync(process.execPath, ["--expose-gc", cli, "bench", "--transports", "nixl", "--sizes", "64MiB,4KiB", "--json", out], {
        env: { ...process.env, ...setting.env },
        timeout: 180_000,
        stdio: "ignore",
      })
      rows = JSON.parse(fs.readFileSync(out, "utf8")).rows
    } catch (error) {
      rows = [{ failed: String(error.message).split("\n")[0] }]
    }
    results.get(setting.name).push(rows)
  }
}

const range = (xs, digits) => {
  if (xs.length === 0) return "–"
  const lo = Math.min(...xs).toFixed(digits)
  const hi = Math.max(...xs).toFixed(digits)
  return lo === hi ? lo : `${lo}–${hi}`
}
console.log("| setting | works | 64 MiB GB/s (ms) | of same-run memcpy | 4 KiB ms | peer death detected |")
console.log("|---|---|---|---|---|---|")
for (const setting of settings) {
  const runs = results.get(setting.name)
  const big = runs.flat().filter((r) => r.bytes === 64 << 20)
  const small = runs.flat().filter((r) => r.bytes === 4096)
  const works = big.length > 0 ? "yes" : `no (${runs.flat().find((r) => r.failed)?.failed ?? "no output"})`
  console.log(
    `| ${setting.name} | ${works} | ${range(big.map((r) => r.gbps), 2)} (${range(big.map((r) => r.medianMs), 0)}) | ${range(big.map((r) => r.memcpyRatio), 2)} | ${range(small.map((r) => r.medianMs), 1)} | ${setting.detects} |`,
  )
}
