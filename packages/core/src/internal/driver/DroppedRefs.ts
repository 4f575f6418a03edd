/**
 * Refs the driver's code drops without releasing them: the directory hears of them only once the
 * driver's garbage collector finds them dead (ObjectRef's FinalizationRegistry), and a driver that
 * makes little garbage of its own may not run a full collection for minutes, while the producers
 * keep every object. JavaScript cannot tell a dropped ref from a held one without a collection, so
 * the driver counts what the objects made since its last collection still hold at their producers.
 * Past half an allowance, it collects as the program next submits a call (or puts an object): right
 * after it, while the actors work on that call and the driver has nothing to do, and after the
 * program's continuation has dropped the refs of the result it just read, so that the collection
 * proves those dead too. Past the whole allowance, or when the program submits nothing for a while,
 * it collects at once. An object released by hand leaves the count at once, and one object alone
 * starts nothing: a program that releases its refs never collects here, whatever their size.
 */
import { forceGc } from "../hostMemoryCache.js"
import type { Entry } from "../objectDirectory.js"
import { metaBytes } from "../wireMetas.js"

/** Objects made since the last collection and still alive that start one, whatever their size. */
export const MAX_UNPROVEN_OBJECTS = 4096
/** The least allowance of bytes, for a host cache that is off or very small. */
const MIN_ALLOWANCE_BYTES = 16 << 20

/**
 * The allowance of bytes for a host cache of `capacity` bytes: all of it. HostMemoryCache lets more
 * than half of that be out of any one size of a sixteenth of the cache or more (sixteen blocks, or
 * as many as the cache holds) before a miss there collects on the spot, and the driver collects
 * past half the allowance, at the next call, so that its frees reach a producer before its cache
 * runs out of blocks of such a size. Each collection marks the driver's whole heap whatever it frees: the fewer,
 * the cheaper.
 */
export const droppedRefAllowance = (capacity: number): number => Math.max(MIN_ALLOWANCE_BYTES, capacity)

/** How long a collection that is due waits for the program's next call before it runs anyway. */
const DUE_IDLE_MS = 100

export class DroppedRefs {
  /** Bytes of each object made since the last collection and still alive. */
  private unproven = new Map<string, number>()
  private unprovenBytes = 0
  /** A collection waits for the program's next call (or DUE_IDLE_MS). */
  private due: NodeJS.Timeout | undefined
  private scheduled = false
  private collected = 0

  constructor(
    private readonly allowanceBytes: number,
    /** Whether the cluster has shut down: it collects nothing more. */
    private readonly closed: () => boolean = () => false,
  ) {}

  /** Full collections the driver has run. */
  get collections(): number {
    return this.collected
  }

  /** Whether a collection waits for the program's next call. */
  get isDue(): boolean {
    return this.due !== undefined
  }

  /** An object is ready: its tensors are held by its producer until it is freed. */
  made(entry: Entry): void {
    const bytes = metaBytes(entry.info!.tensors)
    if (bytes === 0) return
    this.unproven.set(entry.id, bytes)
    this.unprovenBytes += bytes
    // A collection about to run counts afresh after it.
    if (this.scheduled) return
    if (this.pastAllowance()) this.schedule()
    else if (this.due === undefined && this.pastHalf()) this.due = setTimeout(() => this.dueRuns(), DUE_IDLE_MS).unref()
  }

  /** An object is made (a call's result, or a put, the program's or an actor's): a due collection runs after the current job. */
  created(): void {
    if (this.due !== undefined) this.dueRuns()
  }

  freed(entry: Entry): void {
    const bytes = this.unproven.get(entry.id)
    if (bytes === undefined) return
    this.unproven.delete(entry.id)
    this.unprovenBytes -= bytes
  }

  /**
   * One object alone starts nothing, however large: it is most often the one the program is about
   * to read, which a collection now would find alive, and a program that releases each result by
   * hand would pay a collection per call of objects past half the allowance.
   */
  private pastHalf(): boolean {
    return this.unproven.size >= 2 && (this.unprovenBytes > this.allowanceBytes / 2 || this.unproven.size > MAX_UNPROVEN_OBJECTS / 2)
  }

  private pastAllowance(): boolean {
    return this.unproven.size >= 2 && (this.unprovenBytes > this.allowanceBytes || this.unproven.size > MAX_UNPROVEN_OBJECTS)
  }

  /** A due collection runs, unless the program released enough by hand since. */
  private dueRuns(): void {
    if (this.pastHalf()) this.schedule()
    else this.cancelDue()
  }

  private cancelDue(): void {
    clearTimeout(this.due)
    this.due = undefined
  }

  /**
   * A full collection after the current job: the program's continuation has submitted its call by
   * then, so the collection overlaps the actors' work on it.
   */
  private schedule(): void {
    this.cancelDue()
    if (this.scheduled || this.closed()) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      this.unproven = new Map()
      this.unprovenBytes = 0
      if (this.closed()) return
      const gc = forceGc()
      if (gc === undefined) return
      gc()
      this.collected++
    })
  }
}
