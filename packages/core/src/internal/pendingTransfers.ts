/**
 * Transfers in progress on one thread (the transfer agent, or a main thread that receives itself):
 * each with its time limit, abortable when its peer dies, listed for `cluster.inspect()`.
 */
import { TimeoutError, TransferError } from "../Errors.js"
import { limitTimer } from "./arguments.js"

interface Pending {
  readonly label: string
  readonly peer: string
  readonly controller: AbortController
  /** Who asked for it (see `endWaiting`). */
  readonly owner: unknown
  /** Whether it started (past its `after`). */
  started: boolean
}

/** The label of a transfer of one object between two processes, as both ends list it. */
export const transferLabel = (transport: string, objectId: string, from: string, to: string): string =>
  `${transport} ${objectId} ${from} -> ${to}`

/** Aborts a transfer with a TransferError naming its transport (a label's first word). */
const fail = (p: Pending, message: string): void => p.controller.abort(new TransferError({ message, transport: p.label.split(" ")[0] }))

export class PendingTransfers {
  private readonly pending = new Map<number, Pending>()
  private nextId = 1

  /**
   * Runs `run` with a signal that aborts after `timeoutMs` (none when not finite or not positive);
   * rejects with the abort's reason as soon as it is aborted, whatever the transport does. With
   * `after`, the transfer is listed (and abortable) at once but starts, and its time limit with it,
   * only once `after` resolves; `owner`, who asked for it, may end it until then (`endWaiting`).
   */
  track<A>(label: string, peer: string, timeoutMs: number, run: (signal: AbortSignal) => Promise<A>, after?: Promise<void>, owner?: unknown): Promise<A> {
    const id = this.nextId++
    const controller = new AbortController()
    const entry: Pending = { label, peer, controller, owner, started: false }
    let timer: NodeJS.Timeout | undefined
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener("abort", () => reject(controller.signal.reason), { once: true })
    })
    aborted.catch(() => undefined)
    // A transport that throws instead of rejecting must not leak its entry and timer.
    const running = (after ?? Promise.resolve()).then(() => {
      if (controller.signal.aborted) throw controller.signal.reason
      entry.started = true
      if (Number.isFinite(timeoutMs) && timeoutMs > 0) {
        timer = limitTimer(timeoutMs, () => controller.abort(new TimeoutError({ message: `${label} did not complete within ${timeoutMs} ms`, timeoutMs })))
      }
      return run(controller.signal)
    })
    this.pending.set(id, entry)
    return Promise.race([running, aborted]).finally(() => {
      clearTimeout(timer)
      this.pending.delete(id)
    })
  }

  /** Ends every transfer with `peer`: it died. */
  peerDied(peer: string): void {
    for (const p of this.pending.values()) if (p.peer === peer) fail(p, `${p.label} failed: ${peer} died`)
  }

  /** Ends the transfers labelled `label`: whoever asked for them gave up. */
  cancel(label: string, why: string): void {
    for (const p of this.pending.values()) if (p.label === label) fail(p, `${p.label}: ${why}`)
  }

  /** Ends the transfers `owner` asked for that have not started: it is gone, and nobody else waits for them. */
  endWaiting(owner: unknown, why: string): void {
    for (const p of this.pending.values()) if (p.owner === owner && !p.started) fail(p, `${p.label}: ${why}`)
  }

  /** Ends every transfer (the thread is closing). */
  abortAll(why: string): void {
    for (const p of this.pending.values()) fail(p, `${p.label}: ${why}`)
  }

  labels(): Array<string> {
    return [...this.pending.values()].map((p) => p.label)
  }
}
