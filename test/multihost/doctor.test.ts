/**
 * `tensorlane doctor --cluster` against the harness's hosts with their nodes: all well, then
 * Postgres stopped, a host cut off, a node ended, each reported as that check's problem (exit 1).
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Harness, harnessUnavailable, startHosts } from "./harness.ts"
import { type RunningNode, startNode, stopNode } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the doctor --cluster tests: ${unavailable}`)

const CLI = fileURLToPath(new URL("../../packages/cli/dist/main.js", import.meta.url))

interface Doctor {
  readonly code: number
  readonly report: {
    readonly ok: boolean
    readonly postgres: { readonly ok: boolean; readonly problem?: string; readonly tls?: string; readonly plainRefused?: boolean; readonly passwordEncryption?: string }
    readonly hosts: ReadonlyArray<{ readonly name: string; readonly ok: boolean; readonly problem?: string; readonly certificate?: { readonly daysLeft: number }; readonly node?: { readonly transports: ReadonlyArray<string> } }>
  }
  readonly text: string
}

describe.skipIf(unavailable !== undefined)("tensorlane doctor --cluster", () => {
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

  const doctor = async (): Promise<Doctor> => {
    const run = (json: boolean) =>
      new Promise<{ code: number; stdout: string }>((resolve) =>
        execFile(process.execPath, [CLI, "doctor", "--cluster", env.clusterFile, ...(json ? ["--json"] : [])], { timeout: 60_000 }, (error, stdout) =>
          resolve({ code: error === null ? 0 : Number(error.code), stdout }),
        ),
      )
    const [json, text] = await Promise.all([run(true), run(false)])
    expect(text.code).toBe(json.code)
    return { code: json.code, report: JSON.parse(json.stdout), text: text.stdout }
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
    await stopNode(nodes[1]!)
    const { report } = await doctor()
    expect(report.hosts[1]).toMatchObject({ name: "h2", ok: false, problem: expect.stringMatching(/ECONNREFUSED/) })
  })
})
