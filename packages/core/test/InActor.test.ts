/**
 * The context of a running actor method (src/InActor.ts): each method finds its own, before and after
 * its awaits, while others run beside it; outside every method there is none. Where the context
 * rides on async hooks, they are turned off once no method runs.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import { setTimeout as sleep } from "node:timers/promises"
import { afterEach, describe, expect, it, vi } from "vitest"
import { type ActorContext, cancellationSignal, currentActorId, runInActorContext } from "../src/InActor.js"

const contextOf = (actorId: string): ActorContext => {
  const refuse = () => {
    throw new Error("not used here")
  }
  return { actorId, put: refuse, get: refuse, waitTensorFreed: refuse, group: refuse, signal: new AbortController().signal }
}

const onAsyncHooks = "_propagate" in AsyncLocalStorage.prototype

afterEach(() => {
  vi.restoreAllMocks()
})

describe("runInActorContext", () => {
  it("gives each of two methods running at once its own context after their awaits, and none once they end", async () => {
    const disable = vi.spyOn(AsyncLocalStorage.prototype, "disable")
    const seen: Array<string> = []
    const method = (waitMs: number) => async () => {
      seen.push(`${currentActorId()} began`)
      await sleep(waitMs)
      seen.push(`${currentActorId()} after ${waitMs} ms`)
      return currentActorId()
    }
    const short = runInActorContext(contextOf("short"), method(10))
    const long = runInActorContext(contextOf("long"), method(60))
    expect(await short).toBe("short")
    // The first to end leaves the other's context in place.
    expect(disable).not.toHaveBeenCalled()
    expect(await long).toBe("long")
    expect(seen).toEqual(["short began", "long began", "short after 10 ms", "long after 60 ms"])
    expect(disable).toHaveBeenCalledTimes(onAsyncHooks ? 1 : 0)
    expect(() => currentActorId()).toThrow(expect.objectContaining({ _tag: "NotInActorError" }))
  })

  it("runs a synchronous method in its context, and one that throws rejects with what it threw and leaves no context", async () => {
    const context = contextOf("sync")
    expect(await runInActorContext(context, () => cancellationSignal() === context.signal)).toBe(true)
    const thrown = new Error("from the method")
    await expect(
      runInActorContext(context, () => {
        throw thrown
      }),
    ).rejects.toBe(thrown)
    await expect(runInActorContext(context, () => Promise.reject(thrown))).rejects.toBe(thrown)
    expect(() => cancellationSignal()).toThrow(expect.objectContaining({ _tag: "NotInActorError" }))
  })
})
