import { describe, expect, it } from "vitest"
import { PendingTransfers } from "../src/internal/pendingTransfers.ts"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A transfer to "b" without a time limit that waits for `after`, and whether it ever started. */
const waitingTransfer = (pending: PendingTransfers, label: string, after: Promise<void>) => {
  const state = { started: false }
  const transfer = pending.track(
    label,
    "b",
    0,
    async () => {
      state.started = true
    },
    after,
  )
  return { transfer, state }
}

describe("PendingTransfers", () => {
  it("a transfer with `after` is listed at once, starts only once `after` resolves, and its time limit only then", async () => {
    const pending = new PendingTransfers()
    let release!: () => void
    const after = new Promise<void>((resolve) => (release = resolve))
    let startedAt: number | undefined
    const began = performance.now()
    const transfer = pending.track(
      "gloo o-1 a -> b",
      "b",
      100,
      async () => {
        startedAt = performance.now()
        await sleep(50)
        return "moved"
      },
      after,
    )
    // Longer than the time limit: waiting for the object does not count against it.
    await sleep(200)
    expect(startedAt).toBeUndefined()
    expect(pending.labels()).toEqual(["gloo o-1 a -> b"])
    release()
    expect(await transfer).toBe("moved")
    expect(startedAt! - began).toBeGreaterThanOrEqual(190)
    expect(pending.labels()).toEqual([])
  })

  it("cancel ends the transfers of a label, waiting or running, and never starts a waiting one", async () => {
    const pending = new PendingTransfers()
    const waiting = waitingTransfer(pending, "gloo o-2 a -> b", new Promise<void>(() => undefined))
    const running = pending.track("gloo o-3 a -> b", "b", 0, () => new Promise<void>(() => undefined))
    const other = pending.track("gloo o-4 a -> c", "c", 0, () => sleep(20))
    pending.cancel("gloo o-2 a -> b", "its consumer's call was not sent")
    pending.cancel("gloo o-3 a -> b", "its consumer's call was not sent")
    await expect(waiting.transfer).rejects.toThrow("gloo o-2 a -> b: its consumer's call was not sent")
    await expect(running).rejects.toMatchObject({ _tag: "TransferError", transport: "gloo" })
    await other
    expect(waiting.state.started).toBe(false)
    expect(pending.labels()).toEqual([])
  })

  it("a waiting transfer whose object arrives after a cancel is not started", async () => {
    const pending = new PendingTransfers()
    let release!: () => void
    const waiting = waitingTransfer(pending, "gloo o-5 a -> b", new Promise<void>((resolve) => (release = resolve)))
    pending.cancel("gloo o-5 a -> b", "cancelled")
    await expect(waiting.transfer).rejects.toThrow("cancelled")
    release()
    await sleep(10)
    expect(waiting.state.started).toBe(false)
  })

  it("endWaiting ends the transfers of one owner that wait, not those it started nor another owner's", async () => {
    const pending = new PendingTransfers()
    let release!: () => void
    const after = new Promise<void>((resolve) => (release = resolve))
    const owned = pending.track("gloo o-5 a -> b", "b", 0, async () => "moved", after, "x").catch((error: unknown) => error)
    const others = pending.track("gloo o-6 a -> b", "b", 0, async () => "moved", after, "y")
    let finish!: () => void
    const running = pending.track("gloo o-7 a -> c", "c", 0, () => new Promise<string>((resolve) => (finish = () => resolve("moved"))), undefined, "x")
    await sleep(10)
    pending.endWaiting("x", "its asker is gone")
    expect(await owned).toMatchObject({ _tag: "TransferError", message: "gloo o-5 a -> b: its asker is gone" })
    release()
    finish()
    expect(await others).toBe("moved")
    expect(await running).toBe("moved")
    expect(pending.labels()).toEqual([])
  })
})
