/**
 * When an actor has the host memory cache recycle what it dropped (a garbage collection that proves
 * the dropped tensors dead): at idle moments, off its calls' path.
 */
import { recycleHostMemory } from "../../CpuMemory.js"
import type { TensorStore } from "../../TensorStore.js"

/**
 * A free usually comes just before the next call (a loop releases a result and asks again): its memory
 * is recycled after that call; only when none comes is the process idle enough to collect.
 */
const IDLE_AFTER_FREE_MS = 50

export class IdleRecycler {
  private timer: NodeJS.Timeout | undefined
  private at = 0

  constructor(
    private readonly store: TensorStore,
    /** Whether a call runs or waits to. */
    private readonly busy: () => boolean,
  ) {}

  /** After a free: once no call has come for a while. */
  afterFree(): void {
    this.whenIdle(IDLE_AFTER_FREE_MS)
  }

  /** After a call (which may have dropped the copies it received): at once, unless another runs. */
  afterCall(): void {
    this.whenIdle(0)
  }

  /**
   * While a call waits for a receive, which is idle time for this thread: a collection that is due (a
   * size running out) runs now, beside the transfer, rather than after the call, on the next call's path.
   */
  whileReceiving(): void {
    this.recycle()
  }

  private recycle(): void {
    recycleHostMemory(this.store.takeDroppedHostBytes())
  }

  private whenIdle(afterMs: number): void {
    if (this.busy()) return
    const at = performance.now() + afterMs
    // A sooner request (a call just ended) replaces a later one (a free's wait for the next call).
    if (this.timer !== undefined && this.at <= at) return
    clearTimeout(this.timer)
    this.at = at
    this.timer = setTimeout(() => {
      this.timer = undefined
      if (!this.busy()) this.recycle()
    }, afterMs)
  }
}
