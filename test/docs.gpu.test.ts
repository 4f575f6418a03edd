/**
 * The guides' GPU-only snippets (docs.test.ts type-checks them and checks that this file names each):
 * run on machines with enough GPUs, skipped cleanly elsewhere.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const gpus = fs.readdirSync("/dev").filter((name) => /^nvidia\d+$/.test(name)).length
const root = fileURLToPath(new URL("..", import.meta.url))
const runSnippet = (name: string) =>
  promisify(execFile)(process.execPath, ["--import", "tsx", `docs/snippets/${name}`], {
    cwd: root,
    timeout: 120_000,
    env: { ...process.env, NCCL_SOCKET_IFNAME: "lo" },
  })

describe.skipIf(gpus < 3)("docs/snippets on three GPUs", () => {
  it("nccl-pool.ts registers trainer 0's pool with dp and ep, and leaves the staging segment unregistered", async () => {
    const { stdout } = await runSnippet("nccl-pool.ts")
    expect(stdout).toMatch(/^trainer 0 registered with: \{"dp":1,"ep":1\}\ntrainer 1 registered with: \{"dp":1\}\ntrainer 2 registered with: \{"ep":1\}\ntrainer 0 after staging: 2 segments, registered \{"dp":1,"ep":1\}$/m)
  })
})
