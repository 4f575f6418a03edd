/** Waits with a bound, for several things at once. */

/** Waits until every promise has settled, or `ms` has passed, whichever comes first. */
export const settledWithin = async (promises: ReadonlyArray<Promise<unknown>>, ms: number): Promise<void> => {
  if (promises.length === 0) return
  let timer: NodeJS.Timeout | undefined
  await Promise.race([Promise.allSettled(promises), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}
