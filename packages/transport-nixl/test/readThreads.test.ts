/**
 * The READ threads' lifetimes, each in processes of its own (a crash there must fail the test, not
 * take the test runner down): a READ's thread must not touch its job once the JS thread may have
 * settled and freed it, and a worker that ends mid-READ must not leave a thread behind in freed
 * memory or in the unloaded addon. Both used to kill the process without a word (SIGSEGV or
 * SIGABRT, Node's SIGSEGV handler re-raising it with no message).
 */
import { describe, expect, it } from "vitest"
import { runPeers } from "./fixtures/runPeers.ts"

describe("READ threads", () => {
  it("1200 concurrent READs: every byte right, and the consumer process survives with freed memory poisoned", async () => {
    // glibc then fills freed blocks with 0xa5 at once (no per-thread cache delays it): a thread that
    // still reads its job after the JS thread deleted it crashes on every such read instead of rarely.
    const result = await runPeers(["consumer", "300"], { GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" })
    expect(result).toMatchObject({ code: 0, signal: null, result: { reads: 1200, wrong: 0 } })
  }, 60_000)

  it("a worker terminated in the middle of a READ: the process survives it", async () => {
    const result = await runPeers(["teardown"])
    expect(result).toMatchObject({ code: 0, signal: null, result: { terminated: true } })
  }, 60_000)
})
