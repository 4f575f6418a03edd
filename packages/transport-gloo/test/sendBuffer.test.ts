/**
 * The kernel's send buffer for a group's sockets: 512 KiB between ranks on one host (the kernel's
 * autotuned buffer keeps a large transfer's bytes in flight beyond the caches), what
 * TENSORLANE_GLOO_SEND_BUFFER says when set, the kernel's own between different host addresses.
 * Each case connects a two-rank group of fresh child processes (the variable is read as a group is
 * created; the device's address, TENSORLANE_GLOO_HOST, when a process opens its device).
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { inFreshProcess } from "./fixtures/freshProcess.ts"
import { Peer, connectGroup } from "./fixtures/peers.ts"

type Env = Readonly<Record<string, string | undefined>>

/** Each rank's view of its socket to the other (the kernel reports twice what was asked). */
const connectedBuffers = async (env0: Env, env1: Env): Promise<[number, number]> => {
  const peers = await Promise.all([Peer.spawn(env0), Peer.spawn(env1)])
  try {
    await connectGroup(peers)
    const [of0, of1] = await Promise.all(peers.map((p) => p.call<ReadonlyArray<number | undefined>>("sendBuffers")))
    expect(of0[0]).toBeUndefined()
    expect(of1[1]).toBeUndefined()
    return [of0[1]!, of1[0]!]
  } finally {
    for (const p of peers) p.kill()
  }
}

const unset: Env = { TENSORLANE_GLOO_SEND_BUFFER: undefined, TENSORLANE_GLOO_HOST: undefined }
const wmemMax = Number(readFileSync("/proc/sys/net/core/wmem_max", "utf8"))
/** What the kernel reports for a buffer of `bytes` asked for. */
const granted = (bytes: number) => 2 * Math.min(bytes, wmemMax)
const DEFAULT_BYTES = 512 * 1024

describe("the send buffer of a group's sockets", () => {
  it("is 512 KiB between ranks on one host", async () => {
    expect(await connectedBuffers(unset, unset)).toEqual([granted(DEFAULT_BYTES), granted(DEFAULT_BYTES)])
  })

  it("is what TENSORLANE_GLOO_SEND_BUFFER gives, on the ranks that set it", async () => {
    const [of0, of1] = await connectedBuffers({ ...unset, TENSORLANE_GLOO_SEND_BUFFER: "200000" }, unset)
    expect([of0, of1]).toEqual([granted(200_000), granted(DEFAULT_BYTES)])
  })

  it("is the kernel's own with TENSORLANE_GLOO_SEND_BUFFER=kernel, and between ranks on different addresses", async () => {
    const [kernel0, kernel1] = await connectedBuffers({ ...unset, TENSORLANE_GLOO_SEND_BUFFER: "kernel" }, unset)
    expect(kernel0).not.toBe(granted(DEFAULT_BYTES))
    expect(kernel1).toBe(granted(DEFAULT_BYTES))
    // Sockets whose ends have different addresses stand for two hosts. gloo connects from the rank of
    // the higher address to the other, from the address the kernel picks (127.0.0.1 on loopback), so
    // with neither rank on 127.0.0.1 each end sees another address than its own.
    const apart = await connectedBuffers({ ...unset, TENSORLANE_GLOO_HOST: "127.0.0.2" }, { ...unset, TENSORLANE_GLOO_HOST: "127.0.0.3" })
    for (const bytes of apart) expect(bytes).not.toBe(granted(DEFAULT_BYTES))
  })

  it("refuses a value that is neither a byte count nor kernel when a group is created, as an invalid setting", async () => {
    const accepts = "a byte count from 1 to 2147483647, or kernel"
    for (const bad of ["12x", "0", "-5", "4294967296", "512KiB"]) {
      const error = await inFreshProcess<Record<string, string> | null>(
        `const { loadGlooAddon } = await import("@tensorlane/transport-gloo")
         let error = null
         try { new (loadGlooAddon().addon.Group)(0, 1, 30000).destroy() } catch (e) { error = { code: e.code, message: e.message, variable: e.variable, value: e.value, accepts: e.accepts } }
         console.log(JSON.stringify(error))`,
        "TENSORLANE_GLOO_SEND_BUFFER",
        bad,
      )
      expect(error, bad).toEqual({
        code: "setting",
        message: `TENSORLANE_GLOO_SEND_BUFFER must be ${accepts}, got "${bad}"`,
        variable: "TENSORLANE_GLOO_SEND_BUFFER",
        value: bad,
        accepts,
      })
    }
  })
})
