/**
 * `tensorlane bench --hosts h1,h2` on two hosts of the test harness (network namespaces on a bridge,
 * Postgres, a node per host; needs root): the cross-host figure of docs/performance.md. Arguments
 * after the script go to the bench (default: gloo at 64 MiB and 256 MiB).
 *   npx tsx tools/bench/hosts/benchHosts.ts [--sizes 64MiB,256MiB] [--json bench-hosts.json]
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { harnessUnavailable, withHosts } from "../../../test/multihost/harness.ts"
import { startNode, stopNode } from "../../../test/multihost/nodes.ts"

const CLI = fileURLToPath(new URL("../../../packages/cli/dist/main.js", import.meta.url))
const args = process.argv.slice(2)
const unavailable = harnessUnavailable()
if (unavailable !== undefined) {
  console.error(`cannot make the hosts: ${unavailable}`)
  process.exit(2)
}
const code = await withHosts({ hosts: 2 }, async (env) => {
  const nodes = await Promise.all(env.hosts.map((h) => startNode(env, h.name)))
  try {
    const sizes = args.includes("--sizes") ? [] : ["--sizes", "64MiB,256MiB"]
    return spawnSync(process.execPath, [CLI, "bench", "--hosts", "h1,h2", "--cluster", env.clusterFile, ...sizes, ...args], { stdio: "inherit" }).status ?? 1
  } finally {
    await Promise.all(nodes.map(stopNode))
  }
})
process.exit(code)
