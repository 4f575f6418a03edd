/**
 * UCX writes its log to stdout unless UCX_LOG_FILE says otherwise; the transport defaults it to
 * stderr, so that UCX's warnings never land in a program's own output (a CI run once failed parsing
 * a test process's JSON followed by such a line).
 */
import { describe, expect, it } from "vitest"
import { runPeers } from "./fixtures/runPeers.ts"

describe("UCX's log", () => {
  it("goes to stderr, in the consumer and in the producer it forks, and stdout stays the program's", async () => {
    const run = await runPeers(["consumer", "1"], { UCX_LOG_LEVEL: "info" })
    expect(run).toMatchObject({ code: 0, signal: null, result: { reads: 4, wrong: 0 } })
    expect(run.stdout).toBe("")
    // UCX's lines start "[<time>] [<host>:<pid> :<thread>]": both processes logged there.
    const pids = new Set([...run.stderr.matchAll(/^\[[\d.]+\] \[[^:\]]+:(\d+)/gm)].map((m) => m[1]))
    expect(run.stderr).toContain("UCX  INFO")
    expect(pids.size).toBe(2)
  }, 60_000)
})
