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
  it("gives each of two methods running at once its own context after their awaits, and turns it off once both end", async () => {
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
  })

  it("runs a synchronous method in its context; one that throws or rejects fails with what it threw and leaves the context", async () => {
    const disable = vi.spyOn(AsyncLocalStorage.prototype, "disable")
    const context = contextOf("sync")
    expect(await runInActorContext(context, () => cancellationSignal() === context.signal)).toBe(true)
    const thrown = new Error("from the method")
    await expect(
      runInActorContext(context, () => {
        throw thrown
      }),
    ).rejects.toBe(thrown)
    await expect(runInActorContext(context, () => Promise.reject(thrown))).rejects.toBe(thrown)
    expect(disable).toHaveBeenCalledTimes(onAsyncHooks ? 3 : 0)
  })

  it("leaves code that a method left running without its context while no method runs, where the context rides on async hooks", async () => {
    let late: unknown
    const timerFired = new Promise<void>((resolve) => {
      void runInActorContext(contextOf("ended"), () => {
        setTimeout(() => {
          try {
            late = currentActorId()
          } catch (error) {
            late = error
          }
          resolve()
        }, 20)
      })
    })
    await timerFired
    if (onAsyncHooks) expect(late).toMatchObject({ _tag: "NotInActorError" })
    else expect(late).toBe("ended")
  })

  it("says where the context rides on async hooks as Node does: before Node 24, or with --no-async-context-frame", () => {
    const major = Number(process.versions.node.split(".")[0])
    const frames = major >= 24 && !process.execArgv.includes("--no-async-context-frame")
    expect(onAsyncHooks).toBe(!frames)
  })
})
