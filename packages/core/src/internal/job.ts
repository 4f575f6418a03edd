/**
 * Which job the process runs: the synchronous run from one event-loop callback, its microtasks
 * included. A WeakRef made in a job (or dereferenced) keeps its target alive until the job ends, so
 * an object tracked through one cannot be proven dead before then: a loop that never yields holds
 * every such object it made.
 */
let job = 0
let ending = false
/** Node's own, taken at load: fake timers installed later (tests') would never end a job. */
const nextCheck = setImmediate

/**
 * A number that changes once the current job has ended: at the next check phase of the event loop,
 * which may come some callbacks after V8's own end of it (never before), so what a burst of callbacks
 * in one turn of the loop takes counts as one job's.
 */
export const currentJob = (): number => {
  if (!ending) {
    ending = true
    nextCheck(() => {
      ending = false
      job++
    }).unref()
  }
  return job
}
