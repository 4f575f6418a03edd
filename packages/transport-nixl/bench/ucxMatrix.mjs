/**
 * The UCX settings table of README.md: runs actorToActor.mjs (64 MiB and 4 KiB, median of 7 after
 * 2 warm-ups) under each setting, ROUNDS times interleaved (the CI machine is noisy), and prints
 * a markdown row per setting with the best and worst median of the rounds, plus whether peer
 * death detection stays on. Run: node packages/transport-nixl/bench/ucxMatrix.mjs  (after npm run build)
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const ROUNDS = Number(process.env.ROUNDS ?? 2)
const script = fileURLToPath(new URL("./actorToActor.mjs", import.meta.url))
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
    let lines
    try {
      const out = execFileSync(process.execPath, ["--expose-gc", script, String(64 << 20), "4096"], {
        env: { ...process.env, ...setting.env },
        encoding: "utf8",
        timeout: 180_000,
        stdio: ["ignore", "pipe", "ignore"],
      })
      lines = out.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
    } catch (error) {
      lines = [{ failed: String(error.message).split("\n")[0] }]
    }
    results.get(setting.name).push(lines)
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
    `| ${setting.name} | ${works} | ${range(big.map((r) => r.gbps), 2)} (${range(big.map((r) => r.medianMs), 0)}) | ${range(big.map((r) => r.ofMemcpy), 2)} | ${range(small.map((r) => r.medianMs), 1)} | ${setting.detects} |`,
  )
}
