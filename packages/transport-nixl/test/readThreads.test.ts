/**
 * The READ threads' lifetimes, each in processes of its own (a crash there must fail the test, not
 * take the test runner down): a READ's thread must not touch its job once the JS thread may have
 * settled and freed it, and a worker that ends mid-READ must not leave a thread behind in freed
 * memory or in the unloaded addon. Both used to kill the process without a word (SIGSEGV or
 * SIGABRT, Node's SIGSEGV handler re-raising it with no message).
 */
import { describe, expect, it } from "vitest"
import { fileURLToPath } from "node:url"
import { runPeers } from "./fixtures/runPeers.ts"

const RACING_LOAD = fileURLToPath(new URL("./fixtures/racingLoad.mjs", import.meta.url))

describe("READ threads", () => {
  // glibc then fills freed blocks with 0xa5 at once (no per-thread cache delays it): a thread that
  // still reads its job after the JS thread deleted it crashes on every such read instead of rarely.
  const POISONED = { GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" }

  it("1200 concurrent READs, each on a thread of its own: every byte right, and the consumer process survives with freed memory poisoned", async () => {
    const result = await runPeers(["consumer", "300"], { ...POISONED, TENSORLANE_NIXL_READ_HERE_BYTES: "0" })
    expect(result).toMatchObject({ code: 0, signal: null, result: { reads: 1200, wrong: 0, here: 0 } })
  }, 60_000)

  it("1200 concurrent READs of the same host, each copied by the thread that asks for it: every byte right", async () => {
    const result = await runPeers(["consumer", "300"], POISONED)
    expect(result).toMatchObject({ code: 0, signal: null, result: { reads: 1200, wrong: 0 } })
    // The first round's READs wait for UCX to connect to the producer: they go on on threads.
    expect((result.result as { here: number }).here).toBeGreaterThanOrEqual(1196)
  }, 60_000)

  it("an agent created by one thread while another loads NIXL has its configuration: an idle process sleeps", async () => {
    // The library used to be published before its configuration: the main thread, waiting on it,
    // could create the agent with none, whose progress thread then polled without waiting (a whole
    // core). On one CPU that came out in about half the runs, whatever the main thread's head start.
    for (const headStartMs of [0, 1, 5, 20, 40]) {
      const result = await runPeers([String(headStartMs)], {}, { script: RACING_LOAD, oneCpu: true })
      expect(result).toMatchObject({ code: 0, signal: null })
      expect((result.result as { idleCpuMs: number }).idleCpuMs).toBeLessThan(100)
    }
  }, 60_000)

  it("a worker terminated in the middle of a READ: the process survives it", async () => {
    const result = await runPeers(["teardown"])
    expect(result).toMatchObject({ code: 0, signal: null, result: { terminated: true } })
  }, 60_000)
})
