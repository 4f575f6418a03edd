#!/usr/bin/env node
/**
 * tensorlane beside Ray Direct Transport, measured in one run on one machine: `tensorlane bench`'s
 * scenario (consumer.numel(producer.make(n)), submit to result, medians) on Ray (RDT over Gloo, and
 * Ray's object store) and on tensorlane (gloo, object-store, nixl) in its released and natural loops: refs
 * released by hand, and refs left to the garbage collector as users write it (Ray's refs are
 * counted by Python and freed as the expression ends: its one loop is both). Then one table, each
 * tensorlane transport beside the Ray path it replaces (nixl beside RDT over Gloo, Ray's fastest
 * path between CPU actors). tensorlane runs first, Ray after a pause; both time the same number of runs.
 * Each row also names the limit its tensorlane transport moves bytes at, measured in tensorlane's run
 * (raw Gloo for gloo, TCP loopback for object-store, memcpy for nixl), and Ray over that limit: the
 * most any runtime whose call cost nothing but that transfer could be ahead of Ray.
 *   node tools/bench/ray/compare.mjs [--sizes 4KiB,4MiB,64MiB,256MiB] [--repeats 21] [--warmups 2]
 *     [--settle-s 60] [--no-setup] [--json <file>]
 * Ray and torch come from PyPI into .tools/ray-venv (setup-venv.sh, about 5.6 GB; never run by CI).
 * Build the repository first (bash tools/setup.sh).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { formatSize, parseSizes } from "@tensorlane/cli"

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "4KiB,4MiB,64MiB,256MiB" },
    repeats: { type: "string", default: "21" },
    "settle-s": { type: "string", default: "60" },
    warmups: { type: "string", default: "2" },
    "no-setup": { type: "boolean", default: false },
    json: { type: "string" },
  },
})

const here = fileURLToPath(new URL(".", import.meta.url))
const repo = join(here, "..", "..", "..")
const venv = process.env.RAY_VENV ?? join(repo, ".tools", "ray-venv")
const sizes = parseSizes(values.sizes)
const cli = fileURLToPath(new URL("./main.js", import.meta.resolve("@tensorlane/cli")))
/**
 * tensorlane's cells run their loop untimed this long first, as in a default run (`--warm-ms`; four
 * times as long at the first size; a natural cell until the driver has collected twice in it).
 */
const WARM_MS = 1000
const scratch = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-vs-ray-"))
const run = (file, args, env = process.env) => execFileSync(file, args, { cwd: repo, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 })

if (!values["no-setup"]) run("bash", [join(here, "setup-venv.sh")])

process.stderr.write("tensorlane: gloo, object-store, nixl...\n")
const oursJson = join(scratch, "tensorlane.json")
run(process.execPath, [
  "--expose-gc",
  cli,
  "bench",
  "--transports", "gloo,object-store,nixl",
  "--loops", "released,natural",
  "--sizes", values.sizes,
  "--repeats", values.repeats,
  "--warmups", values.warmups,
  // Exactly as many timed runs as Ray gets (bench would otherwise time fast cells for at least a second),
  // after the warm-ups a default run has: V8 optimises the processes' code over the first seconds of
  // calls, where Ray's Python runs as it will from its first.
  "--min-time-ms", "0",
  "--warm-ms", String(WARM_MS),
  "--json", oursJson,
])
const ours = JSON.parse(fs.readFileSync(oursJson, "utf8"))
// Memory a finished run gave back can make fresh pages slow for a while on a small VM: the second
// run waits for the machine to settle.
process.stderr.write(`waiting ${values["settle-s"]} s for the machine to settle...\n`)
await new Promise((resolve) => setTimeout(resolve, Number(values["settle-s"]) * 1000))

process.stderr.write("Ray: RDT over Gloo and the object store...\n")
const ray = JSON.parse(
  run(join(venv, "bin", "python"), [join(here, "ray_bench.py"), "--sizes", sizes.join(","), "--repeats", values.repeats, "--warmups", values.warmups, "--steady-calls", ours.steadyCalls.join(","), "--temp-dir", join(scratch, "ray")], {
    ...process.env,
    RAY_AUTH_MODE: "disabled",
  }),
)

fs.rmSync(scratch, { recursive: true, force: true })

const rayMs = (path, bytes) => ray.rows.find((r) => r.path === path && r.bytes === bytes).medianMs
const oursMs = (transport, loop, bytes) => ours.rows.find((r) => r.transport === transport && r.loop === loop && r.bytes === bytes).medianMs
const limitOf = { gloo: ["raw Gloo", "rawGlooMs"], "object-store": ["TCP loopback", "tcpMs"], nixl: ["memcpy", "memcpyMs"] }
const limitMs = (transport, bytes) => ours.limits.find((l) => l.bytes === bytes)?.[limitOf[transport][1]]
const ms = (x) => x.toFixed(2)
const times = (slow, fast) => `${(slow / fast).toFixed(1)}x`

console.log(
  `tensorlane vs Ray ${ray.ray} (torch ${ray.torch}): median of ${values.repeats} after ${values.warmups} warm-ups per path and at least ${sizes.map((bytes, i) => `${ours.steadyCalls[i]} calls at ${formatSize(bytes)}`).join(", ")} (tensorlane: and each cell's loop ${WARM_MS / 1000} s untimed, ${(4 * WARM_MS) / 1000} s at the first size), ms submit to result, node ${ours.node}, ${ours.host.cpus} CPUs, ${ours.date}`,
)
console.log("| size | tensorlane transport | Ray path | Ray ms | tensorlane released ms | tensorlane natural ms | Ray / released | Ray / natural | limit | limit ms | Ray / limit |")
console.log("|---|---|---|---|---|---|---|---|---|---|---|")
const rayPathOf = { gloo: "ray-rdt-gloo", "object-store": "ray-object-store", nixl: "ray-rdt-gloo" }
for (const bytes of sizes) {
  for (const [transport, path] of Object.entries(rayPathOf)) {
    const r = rayMs(path, bytes)
    const released = oursMs(transport, "released", bytes)
    const natural = oursMs(transport, "natural", bytes)
    const limit = limitMs(transport, bytes)
    const limitCells = limit === undefined ? "— | —" : `${limit.toFixed(3)} | ${times(r, limit)}`
    console.log(
      `| ${formatSize(bytes)} | ${transport} | ${path} | ${ms(r)} | ${ms(released)} | ${ms(natural)} | ${times(r, released)} | ${times(r, natural)} | ${limitOf[transport][0]} | ${limitCells} |`,
    )
  }
}
if (values.json !== undefined) fs.writeFileSync(values.json, `${JSON.stringify({ ray, tensorlane: ours }, null, 2)}\n`)
