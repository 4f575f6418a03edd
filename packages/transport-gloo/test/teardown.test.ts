/**
 * Workers that end while the addon has work or objects in them, each in a process of its own (a
 * crash there must fail the test, not take the test runner down), under glibc settings that fill
 * freed blocks with 0xa5 at once: a thread that touches freed memory crashes reliably.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

type Outcome = { code: number | null; signal: string | null; stdout: string }

const inProcess = (fixture: string): Promise<Outcome> => {
  const env = { ...process.env, GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" }
  return new Promise((resolve) => {
    execFile(process.execPath, [fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url))], { env, timeout: 50_000 }, (error, stdout) =>
      resolve({ code: error === null ? 0 : (error.code as number | null), signal: error?.signal ?? null, stdout }),
    )
  })
}

describe("the teardown of a worker's environment", () => {
  // fixtures/teardown.mjs: the receive must not go on into the ended worker and settle through the
  // thread-safe function Node freed with it: that used to abort the process (SIGABRT) once the peer sent.
  it("aborts the worker's receive, and the process survives its peer's send", async () => {
    const outcome = await inProcess("teardown.mjs")
    expect(outcome).toMatchObject({ code: 0, signal: null })
    // Nothing received the send's tensor: the receive had ended with its worker.
    expect(JSON.parse(outcome.stdout)).toEqual({ sent: "timeout" })
  })

  // fixtures/collected.mjs: the finalizers of groups collected during the teardown must run while
  // the worker's Node-API environment lives (on Node 24 a terminated worker crashed its process,
  // SIGSEGV, most times). A few processes, so that a crash that comes one time in several shows.
  it("runs the finalizers of the worker's collected groups, and the process survives", async () => {
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => inProcess("collected.mjs")))
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({ code: 0, signal: null })
      expect(JSON.parse(outcome.stdout)).toEqual({ ended: 4 })
    }
  })

  // fixtures/terminated.mjs: a terminated worker's JS may still call the addon, and its settled
  // operations may still be dispatched, after Node-API refuses to run JS there. The Napi::Error
  // that follows could be thrown to no JS: it escaped node-addon-api's wrapper and aborted the
  // process (SIGABRT, "terminate called after throwing an instance of 'Napi::Error'") in nearly
  // every run of 20 workers.
  it("drops the errors of a worker terminated mid-transfer, and the process survives", async () => {
    const outcomes = await Promise.all(Array.from({ length: 2 }, () => inProcess("terminated.mjs")))
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({ code: 0, signal: null })
      expect(JSON.parse(outcome.stdout)).toEqual({ ended: 20 })
    }
  })
})
