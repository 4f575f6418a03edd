/**
 * The liveness of a driver's session with a host's node. The driver pings; the node answers. Either
 * end that hears nothing for SILENCE_LIMIT_MS takes the other for dead: the driver fails the host's
 * actors (ActorDiedError), the node ends the driver's actors. TCP alone would notice a dead host or a
 * cut link only after minutes of retransmissions.
 */

/** How often the driver pings each node it has actors on. */
export const PING_INTERVAL_MS = 1_000

/** Silence after which a session is over: a host's death is reported within this and a ping's interval. */
export const SILENCE_LIMIT_MS = 3_000

/** Calls `onSilent` once nothing was heard for SILENCE_LIMIT_MS; `heard` says something was. */
export const watchSilence = (onSilent: () => void): { readonly heard: () => void; readonly stop: () => void } => {
  let last = Date.now()
  const timer = setInterval(() => {
    if (Date.now() - last <= SILENCE_LIMIT_MS) return
    clearInterval(timer)
    onSilent()
  }, PING_INTERVAL_MS / 4)
  timer.unref()
  return { heard: () => (last = Date.now()), stop: () => clearInterval(timer) }
}
