/**
 * A worker that ends while a receive of its waits (fixtures/teardown.mjs, in a process of its own:
 * a crash there must fail the test, not take the test runner down). The receive must not go on
 * into the ended worker and settle through the thread-safe function Node freed with it: that used
 * to abort the process (SIGABRT) once the peer sent.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const fixture = fileURLToPath(new URL("./fixtures/teardown.mjs", import.meta.url))

describe("the teardown of a worker's environment", () => {
  it("aborts the worker's receive, and the process survives its peer's send", async () => {
    // glibc fills freed blocks with 0xa5 at once: a thread that touches freed memory crashes reliably.
    const env = { ...process.env, GLIBC_TUNABLES: "glibc.malloc.tcache_count=0", MALLOC_PERTURB_: "165" }
    const outcome = await new Promise<{ code: number | null; signal: string | null; stdout: string }>((resolve) => {
      execFile(process.execPath, [fixture], { env, timeout: 50_000 }, (error, stdout) =>
        resolve({ code: error === null ? 0 : (error.code as number | null), signal: error?.signal ?? null, stdout }),
      )
    })
    expect(outcome).toMatchObject({ code: 0, signal: null })
    // Nothing received the send's tensor: the receive had ended with its worker.
    expect(JSON.parse(outcome.stdout)).toEqual({ sent: "timeout" })
  })
})
