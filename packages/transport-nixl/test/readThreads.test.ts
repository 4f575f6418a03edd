/**
 * The READ threads' lifetimes, each in processes of its own (a crash there must fail the test, not
 * take the test runner down): a READ's thread must not touch its job once the JS thread may have
 * settled and freed it, and a worker that ends mid-READ must not leave a thread behind in freed
 * memory or in the unloaded addon. Both used to kill the process without a word (SIGSEGV or
 * SIGABRT, Node's SIGSEGV handler re-raising it with no message).
 */
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const PEERS = fileURLToPath(new URL("./fixtures/readPeers.mjs", import.meta.url))

const run = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  new Promise<{ code: number | null; signal: NodeJS.Signals | null; result: unknown; output: string }>((resolve, reject) => {
    const child = fork(PEERS, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe", "ipc"] })
    let output = ""
    let result: unknown
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.on("message", (message) => (result = message))
    child.on("error", reject)
    child.on("close", (code, signal) => resolve({ code, signal, result, output }))
  })

describe("READ threads", () => {
  it("1200 concurrent READs: every byte right, and the consumer process survives with freed memory poisoned", async () => {
    // glibc then fills freed blocks with 0xa5 at once (no per-thread cache delays it): a thread that
    // still reads its job after the JS thread deleted it crashes on every such read instead of rarely.
    const result = await run(["consumer", "300"], { GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" })
    expect(result).toMatchObject({ code: 0, signal: null, result: { reads: 1200, wrong: 0 } })
  }, 60_000)

  it("a worker terminated in the middle of a READ: the process survives it", async () => {
    const result = await run(["teardown"])
    expect(result).toMatchObject({ code: 0, signal: null, result: { terminated: true } })
  }, 60_000)
})
