/**
 * The commands of a cluster across hosts against the harness's hosts with their nodes:
 * `tensorlane bench --hosts h1,h2` (gloo from h1's producer to h2's consumer next to a raw TCP
 * stream between the same two hosts, in one run, with its share of that stream against the bar) and
 * `tensorlane doctor --cluster` (all well, then Postgres stopped, Postgres taking the role without
 * TLS, a host cut off, a node ended, each reported as that check's problem with exit code 1).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import type { BenchResult } from "../../packages/cli/src/Bench.ts"
import type { ClusterDoctorReport } from "../../packages/cli/src/ClusterDoctor.ts"
import { tensorlane } from "../../packages/cli/test/cli.ts"
import { type Harness, harnessUnavailable } from "./harness.ts"
import { stopNode, useHosts } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the tests of bench --hosts and doctor --cluster: ${unavailable}`)

interface Doctor {
  readonly code: number
  readonly report: ClusterDoctorReport
  readonly text: string
}

describe.skipIf(unavailable !== undefined)("tensorlane bench --hosts and doctor --cluster", () => {
  const hosts = useHosts({ hosts: 2 })
  let env: Harness
  beforeAll(() => {
    env = hosts.env
  })

  it("runs gloo from h1 to h2 next to a raw TCP stream between them, with its share against the bar", async () => {
    const json = path.join(env.folder, "bench.json")
    const { code, stdout, stderr } = await tensorlane(["bench", "--hosts", "h1,h2", "--cluster", env.clusterFile, "--sizes", "64KiB,1MiB", "--repeats", "3", "--warmups", "1", "--min-time-ms", "0", "--json", json])
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toContain("| TCP h1 -> h2 ms | vs TCP |")
    expect(stdout).toMatch(/^\| gloo \| released \| 1 MiB \| \d+\.\d{2} \|/m)
    expect(stdout).toMatch(/^gloo \(natural loop\) h1 -> h2 at 1 MiB: \d+\.\d% of a raw TCP stream between the same hosts \(bar 70\.0%: (met|NOT met)\)$/m)
    const result = JSON.parse(fs.readFileSync(json, "utf8")) as BenchResult
    expect(result.across).toEqual({ producer: "h1", producerAddress: env.hosts[0]!.address, consumer: "h2", consumerAddress: env.hosts[1]!.address })
    expect(result.transports).toEqual(["gloo"])
    // The message ring is this machine's, not the hosts': a run across hosts has none.
    expect(result.ring).toBeUndefined()
    expect(stdout).not.toContain("message ring")
    expect(result.rows.map((r) => [r.transport, r.loop, r.bytes, r.samplesMs.length])).toEqual([
      ["gloo", "released", 65536, 3],
      ["gloo", "natural", 65536, 3],
      ["gloo", "held", 65536, 3],
      ["gloo", "released", 1 << 20, 3],
      ["gloo", "natural", 1 << 20, 3],
      ["gloo", "held", 1 << 20, 3],
    ])
    // Raw Gloo and raw NIXL are pairs on one machine: none across hosts.
    for (const limit of result.limits) {
      expect(limit.tcpMs).toBeGreaterThan(0)
      expect(limit.rawGlooMs).toBeUndefined()
      expect(limit.rawNixlMs).toBeUndefined()
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

  const doctor = async (): Promise<Doctor> => {
    const [json, text] = await Promise.all([tensorlane(["doctor", "--cluster", env.clusterFile, "--json"]), tensorlane(["doctor", "--cluster", env.clusterFile])])
    expect(text.code).toBe(json.code)
    return { code: json.code, report: JSON.parse(json.stdout) as ClusterDoctorReport, text: text.stdout }
  }

  it("reports Postgres and every node well, with what each node reports", async () => {
    const { code, report, text } = await doctor()
    expect(report.postgres).toMatchObject({ ok: true, tls: "TLSv1.3", plainRefused: true, passwordEncryption: "scram-sha-256" })
    expect(report.hosts.map((h) => [h.name, h.ok])).toEqual([["h1", true], ["h2", true]])
    for (const h of report.hosts) {
      expect(h.certificate!.daysLeft).toBeGreaterThan(300)
      expect(h.node!.transports).toContain("@tensorlane/transport-gloo")
    }
    expect(code).toBe(0)
    expect(text.split("\n").filter((line) => line.startsWith("PROBLEM"))).toEqual([])
  })

  it("reports Postgres stopped", async () => {
    await env.stopPostgres()
    try {
      const { code, report } = await doctor()
      expect(report.postgres.ok).toBe(false)
      expect(report.postgres.problem).toMatch(/ConnectionError: ECONNREFUSED/)
      expect(report.hosts.every((h) => h.ok)).toBe(true)
      expect(code).toBe(1)
    } finally {
      await env.startPostgres()
    }
  })

  it("reports Postgres letting the cluster's role in without TLS, asking for its password in clear text, without sending it", async () => {
    const hba = path.join(env.folder, "postgres", "data", "pg_hba.conf")
    const log = path.join(env.folder, "postgres", "log")
    const strict = fs.readFileSync(hba, "utf8")
    fs.appendFileSync(hba, `host ${env.config.postgres.database} ${env.config.postgres.user} ${env.subnet} password\n`)
    await env.stopPostgres()
    await env.startPostgres()
    try {
      const logged = fs.statSync(log).size
      const { code, report } = await doctor()
      // The role's password would have logged in: Postgres saw another one from each of the two doctors.
      const failed = fs.readFileSync(log, "utf8").slice(logged).match(new RegExp(`password authentication failed for user "${env.config.postgres.user}"`, "g"))
      expect(failed ?? []).toHaveLength(2)
      expect(report.postgres).toMatchObject({ ok: false, plainRefused: false, tls: "TLSv1.3", problem: expect.stringMatching(/without TLS \(AuthenticationError: 28P01/) })
      expect(code).toBe(1)
    } finally {
      fs.writeFileSync(hba, strict)
      await env.stopPostgres()
      await env.startPostgres()
    }
  })

  it("reports a host cut off, and a host whose node is not running", async () => {
    env.linkDown("h2")
    try {
      const { code, report } = await doctor()
      expect(report.hosts[1]).toMatchObject({ name: "h2", ok: false, problem: expect.stringMatching(/no TLS handshake within 5000 ms/) })
      expect(report.hosts[0]!.ok).toBe(true)
      expect(code).toBe(1)
    } finally {
      env.linkUp("h2")
    }
    await stopNode(hosts.nodes.get("h2")!)
    const { report } = await doctor()
    expect(report.hosts[1]).toMatchObject({ name: "h2", ok: false, problem: expect.stringMatching(/ECONNREFUSED/) })
  })
})
