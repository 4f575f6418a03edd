/**
 * `tensorlane bench --hosts h1,h2` against the harness's hosts with their nodes: gloo from h1's
 * producer to h2's consumer next to a raw TCP stream between the same two hosts, in one run, with
 * its share of that stream against the bar; and the command lines it refuses.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { BenchResult } from "../../packages/cli/src/Bench.ts"
import { tensorlane } from "../../packages/cli/test/cli.ts"
import { type Harness, harnessUnavailable, startHosts } from "./harness.ts"
import { type RunningNode, startNode, stopNode } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the bench --hosts tests: ${unavailable}`)

describe.skipIf(unavailable !== undefined)("tensorlane bench --hosts", () => {
  let env: Harness
  let nodes: Array<RunningNode> = []
  beforeAll(async () => {
    env = await startHosts({ hosts: 2 })
    nodes = await Promise.all(env.hosts.map((h) => startNode(env, h.name)))
  }, 120_000)
  afterAll(async () => {
    await Promise.all(nodes.map(stopNode))
    await env?.teardown()
  })

  it("runs gloo from h1 to h2 next to a raw TCP stream between them, with its share against the bar", async () => {
    const json = path.join(env.folder, "bench.json")
    const { code, stdout, stderr } = await tensorlane(["bench", "--hosts", "h1,h2", "--cluster", env.clusterFile, "--sizes", "64KiB,1MiB", "--repeats", "3", "--warmups", "1", "--min-time-ms", "0", "--json", json])
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toContain("| TCP h1 -> h2 ms | vs TCP |")
    expect(stdout).toMatch(/^\| gloo \| 1 MiB \| \d+\.\d{2} \|/m)
    expect(stdout).toMatch(/^gloo h1 -> h2 at 1 MiB: \d+\.\d% of a raw TCP stream between the same hosts \(bar 70\.0%: (met|NOT met)\)$/m)
    const result = JSON.parse(fs.readFileSync(json, "utf8")) as BenchResult
    expect(result.across).toEqual({ producer: "h1", producerAddress: env.hosts[0]!.address, consumer: "h2", consumerAddress: env.hosts[1]!.address })
    expect(result.transports).toEqual(["gloo"])
    expect(result.rows.map((r) => [r.transport, r.bytes, r.samplesMs.length])).toEqual([["gloo", 65536, 3], ["gloo", 1 << 20, 3]])
    for (const limit of result.limits) {
      expect(limit.tcpMs).toBeGreaterThan(0)
      expect(limit.rawGlooMs).toBeUndefined()
    }
    for (const row of result.rows) expect(row.tcpRatio).toBeCloseTo(result.limits.find((l) => l.bytes === row.bytes)!.tcpMs / row.medianMs, 9)
  })

  it("refuses one host, a host not in the config, and --hosts without --cluster", async () => {
    for (const [args, message] of [
      [["--hosts", "h1", "--cluster", env.clusterFile], /two hosts are needed/],
      [["--hosts", "h1,h9", "--cluster", env.clusterFile], /h9 is not a host of/],
      [["--hosts", "h1,h1", "--cluster", env.clusterFile], /two different hosts are needed/],
      [["--hosts", "h1,h2"], /--hosts and --cluster go together/],
    ] as const) {
      const run = await tensorlane(["bench", ...args, "--sizes", "64KiB"])
      expect(run.code).toBe(2)
      expect(run.stderr).toMatch(message)
    }
  })
})
