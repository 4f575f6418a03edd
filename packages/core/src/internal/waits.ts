/** Waits with a bound, for several things at once. */
import { limitTimer } from "./arguments.js"

/**
 * Waits until every promise has fulfilled, one has failed, or `timeoutMs` has passed: undefined when
 * all fulfilled, else the first failure (or `timedOut()`). Nothing is ended here: the caller ends
 * whatever still runs.
 */
export const firstFailure = async (promises: ReadonlyArray<Promise<unknown>>, timeoutMs: number, timedOut: () => Error): Promise<unknown> => {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      Promise.all(promises).then(
        () => undefined,
        (error: unknown) => error,
      ),
      new Promise<unknown>((resolve) => {
        timer = limitTimer(timeoutMs, () => resolve(timedOut()))
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** Waits until every promise has settled, or `ms` has passed, whichever comes first. */
export const settledWithin = async (promises: ReadonlyArray<Promise<unknown>>, ms: number): Promise<void> => {
  if (promises.length === 0) return
  let timer: NodeJS.Timeout | undefined
  await Promise.race([Promise.allSettled(promises), new Promise<void>((resolve) => (timer = limitTimer(ms, resolve)))])
  clearTimeout(timer)
}
