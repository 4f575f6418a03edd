/**
 * The memory of failed transfers. A transport that cannot cancel at once (an aborted gloo receive
 * stays posted until its pair closes) may still write the buffers of a transfer that already failed,
 * so their memory must not be recycled for new tensors until the transport says it no longer can.
 */
import type { Tensor } from "../Tensor.js"
import type { PromiseTransport } from "../Transport.js"

const ignore = (): void => undefined

/** What one call of a transport (a fetch, receive or collective) may still write after it settled. */
export class BufferUse {
  private call: Promise<unknown> | undefined
  private readonly until: Array<Promise<unknown>> = []

  constructor(private readonly transport: PromiseTransport) {}

  private readonly writesUntil = (done: Promise<unknown>): void => {
    this.until.push(done)
  }

  /** Runs the call; what it returns is the transport's own promise, not the runtime's race of it against its abort. */
  run<A>(call: (writesUntil: (done: Promise<unknown>) => void) => Promise<A>): Promise<A> {
    const running = call(this.writesUntil)
    this.call = running
    return running
  }

  /**
   * Settles once the transport no longer writes the call's buffers: at once if it was never called,
   * never for a transport that cannot tell (no `tracksBuffers`).
   */
  released(): Promise<void> {
    const call = this.call
    if (call === undefined) return Promise.resolve()
    if (this.transport.capabilities.tracksBuffers !== true) return new Promise(ignore)
    return call.then(ignore, ignore).then(() => Promise.allSettled(this.until)).then(ignore)
  }
}

const quarantined = new Set<ReadonlyArray<Tensor>>()

/** Keeps the tensors of a failed transfer or collective (and so their memory) out of reuse until `released` settles. */
export const quarantine = (tensors: ReadonlyArray<Tensor>, released: Promise<void>): void => {
  // A copy: the same array may be quarantined twice (a collective retried with the same tensors).
  const kept = [...tensors]
  quarantined.add(kept)
  void released.then(() => quarantined.delete(kept))
}
