/**
 * Garbage collections for core's tests. vitest workers run without --expose-gc; V8 lets the flag be
 * turned on at run time, and then exposes `gc` to a context made while it is on.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { afterAll, beforeAll, vi } from "vitest"

/** A full collection of this worker, whatever `globalThis.gc` is. */
export const exposedGc = (() => {
  setFlagsFromString("--expose-gc")
  return runInNewContext("gc") as (options?: { readonly type: "minor" | "major" }) => void
})()

export interface CountedGc {
  /** The full collections the code under test ran. */
  count: number
  /** How long each collection takes on the clock of `onCollectionClock`. */
  collectionMs: number
  /** That clock, in ms. */
  clockMs: number
}

/**
 * Gives the code under test (host memory's cache, which collects through `globalThis.gc`), for the
 * tests of the calling file, a collection that counts itself and moves `clockMs` by `collectionMs`.
 */
export const countedGc = (): CountedGc => {
  const counted: CountedGc = { count: 0, collectionMs: 0, clockMs: 0 }
  beforeAll(() => {
    ;(globalThis as { gc?: typeof exposedGc }).gc = (options) => {
      // Minor collections pass through uncounted: the code under test runs one only to finish a full one.
      if (options?.type === "minor") return exposedGc(options)
      counted.count++
      exposedGc()
      counted.clockMs += counted.collectionMs
    }
  })
  afterAll(() => {
    delete (globalThis as { gc?: typeof exposedGc }).gc
  })
  return counted
}

/**
 * Runs `body` with performance.now reading `counted.clockMs` (from 1e6 ms), which only collections and
 * the test move, each collection taking `collectionMs`: timings the machine's speed plays no part in.
 */
export const onCollectionClock = async (counted: CountedGc, collectionMs: number, body: () => void | Promise<void>): Promise<void> => {
  counted.clockMs = 1e6
  counted.collectionMs = collectionMs
  const clock = vi.spyOn(performance, "now").mockImplementation(() => counted.clockMs)
  try {
    await body()
  } finally {
    clock.mockRestore()
    counted.collectionMs = 0
  }
}
