/**
 * Requests that wait for their reply: the one table of pending resolve/reject that every channel
 * keeps, in the driver, the actors and the agents alike. It hands out request ids, settles a request
 * by its reply, fails it after its time limit, and fails at once those of a peer that is gone (it
 * died, or its connection closed) or all of them (closing). A reply names who sent it (`from`): a
 * peer cannot settle a request made of another, whose ids it may guess.
 */
import type { WireError } from "./messages.js"
import { limitTimer } from "./arguments.js"
import { fromWireError } from "./wireError.js"

export interface RequestOptions<C> {
  /** Who answers (any key: an actor id, a connection): `failPeer` fails its requests together. */
  readonly peer?: unknown
  /** What the reply's handler needs of its request, read back with `context`. */
  readonly context?: C
  /** After this long the request fails with `timedOut()` and is forgotten: a late reply is ignored. */
  readonly timeout?: { readonly ms: number; readonly timedOut: () => Error }
}

interface Pending<A, C> {
  readonly peer: unknown
  readonly context: C | undefined
  readonly resolve: (value: A) => void
  readonly reject: (error: unknown) => void
  readonly timer: NodeJS.Timeout | undefined
}

export class Requests<A, C = never> {
  private readonly pending = new Map<number, Pending<A, C>>()
  private nextId = 1

  /**
   * Sends a request (`send`, given its id) and waits for its reply. `send` runs first: one that throws
   * (a message over what the peer accepts) fails the request and leaves nothing behind.
   */
  request(send: (id: number) => void, options: RequestOptions<C> = {}): Promise<A> {
    const id = this.nextId++
    return new Promise<A>((resolve, reject) => {
      send(id)
      const timeout = options.timeout
      const timer =
        timeout === undefined
          ? undefined
          : limitTimer(timeout.ms, () => {
              if (this.pending.delete(id)) reject(timeout.timedOut())
            })
      this.pending.set(id, { peer: options.peer, context: options.context, resolve, reject, timer })
    })
  }

  /** How many requests wait for their reply. */
  get size(): number {
    return this.pending.size
  }

  /** The context of a request still waiting for its reply from `from` (see `peer`). */
  context(id: number, from?: unknown): C | undefined {
    return this.waiting(id, from)?.context
  }

  /**
   * Settles a request with its reply from `from` (see `peer`; left out where only one peer answers);
   * false when none waits for that id from it (answered, timed out, failed, never made, or asked of another).
   */
  resolve(id: number, value: A, from?: unknown): boolean {
    const pending = this.take(id, from)
    pending?.resolve(value)
    return pending !== undefined
  }

  reject(id: number, error: unknown, from?: unknown): boolean {
    const pending = this.take(id, from)
    pending?.reject(error)
    return pending !== undefined
  }

  /** Settles a request by a reply that carries either a failure (`error`, rebuilt as raised by `raiser`) or its value. */
  answer(id: number, error: WireError | undefined, value: A, raiser: { readonly actor: string; readonly method: string }, from?: unknown): boolean {
    return error !== undefined ? this.reject(id, fromWireError(error, raiser), from) : this.resolve(id, value, from)
  }

  /** Fails every request that `peer` was to answer. */
  failPeer(peer: unknown, error: unknown): void {
    for (const [id, pending] of this.pending) if (pending.peer === peer) this.reject(id, error)
  }

  failAll(error: unknown): void {
    for (const id of [...this.pending.keys()]) this.reject(id, error)
  }

  private waiting(id: number, from: unknown): Pending<A, C> | undefined {
    const pending = this.pending.get(id)
    return pending !== undefined && (from === undefined || pending.peer === from) ? pending : undefined
  }

  private take(id: number, from: unknown): Pending<A, C> | undefined {
    const pending = this.waiting(id, from)
    if (pending === undefined) return undefined
    this.pending.delete(id)
    clearTimeout(pending.timer)
    return pending
  }
}
