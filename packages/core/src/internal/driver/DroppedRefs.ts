/**
 * Refs the driver's code drops without releasing them: the directory hears of them only once the
 * driver's garbage collector finds them dead (ObjectRef's FinalizationRegistry), and a driver that
 * makes little garbage of its own may not run a full collection for minutes, while the producers
 * keep every object. JavaScript cannot tell a dropped ref from a held one without a collection, so
 * the driver counts what the objects made since its last collection still hold at their producers;
 * past half an allowance, it has V8 start an incremental collection, whose marking runs mostly on
 * V8's threads and in short steps while the driver waits, and whatever the program dropped is freed
 * when it ends; past the whole allowance before it has ended, a full collection at once. An object
 * released by hand leaves the count at once, and one object alone starts nothing: a program that
 * releases its refs never collects here, whatever their size.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { forceGc } from "../hostMemoryCache.js"
import type { Entry } from "../objectDirectory.js"

/** Objects made since the last collection and still alive that start one, whatever their size. */
export const MAX_UNPROVEN_OBJECTS = 4096
/** The least allowance of bytes, for a host cache that is off or very small. */
const MIN_ALLOWANCE_BYTES = 16 << 20

/**
 * The allowance of bytes for a host cache of `capacity` bytes: half of it. HostMemoryCache lets at
 * least that much be out of any one size of a thirty-second of the cache or more (sixteen blocks, or
 * as many as the cache holds) before a miss there collects on the spot, and the marking starts at half
 * the allowance, so that its frees reach a producer before its cache runs out of blocks. Each
 * collection marks the driver's whole heap whatever it frees: the fewer, the cheaper.
 */
export const droppedRefAllowance = (capacity: number): number => Math.max(MIN_ALLOWANCE_BYTES, Math.floor(capacity / 2))

/**
 * A full collection of the driver's heap; none where V8 refuses to expose one (refs then wait for the
 * program's own collections, as they would without this module), said once by a process warning.
 */
const fullCollection = (): (() => void) => {
  const exposed = forceGc()
  if (exposed !== undefined) return exposed
  // The driver runs in the program's own process, seldom started with --expose-gc: V8 lets the flag
  // be turned on at run time, and then exposes `gc` to contexts made while it is on, only to them.
  let gc: unknown
  try {
    setFlagsFromString("--expose-gc")
    gc = runInNewContext("gc")
  } catch {
    gc = undefined
  } finally {
    setFlagsFromString("--no-expose-gc")
  }
  if (typeof gc === "function") return gc as () => void
  process.emitWarning("tensorlane: V8 exposes no garbage collection here: refs left unreleased are freed only when the program collects", {
    code: "TENSORLANE_NO_GC",
  })
  return () => {}
}

/**
 * V8 starts an incremental, mostly concurrent full collection when the memory outside its heap that
 * JavaScript objects hold grows past 64 MiB over its level at the last full collection; an
 * ArrayBuffer reports its bytes as such memory when it is made, and zeroed pages it never touches
 * cost no physical memory. Turns the marking on and returns true; false where the buffer cannot be
 * had (a process limited in address space), for a full collection at once instead.
 */
const EXTERNAL_PRESSURE_BYTES = (64 << 20) + 1
const startMarking = (): boolean => {
  try {
    new ArrayBuffer(EXTERNAL_PRESSURE_BYTES)
    return true
  } catch {
    return false
  }
}

export class DroppedRefs {
  /** Bytes of each object made since the collection under way began (or the last one) and still alive. */
  private unproven = new Map<string, number>()
  private unprovenBytes = 0
  /** Bytes of each object made before the collection under way began and still alive. */
  private marking = new Map<string, number>()
  private markingBytes = 0
  /** The collection under way: its sentinel dies in it, and its finalizer says it has ended. */
  private round = 0
  private underWay = false
  private readonly ended = new FinalizationRegistry<number>((round) => {
    if (round !== this.round) return
    this.underWay = false
    this.marking = new Map()
    this.markingBytes = 0
  })
  private scheduled = false
  private gc: (() => void) | undefined
  private collected = 0
  private begun = 0

  constructor(private readonly allowanceBytes: number) {}

  /** Full collections the driver has run, each blocking it until done. */
  get collections(): number {
    return this.collected
  }

  /** Incremental collections begun. */
  get markings(): number {
    return this.begun
  }

  /** An object is ready: its tensors are held by its producer until it is freed. */
  made(entry: Entry): void {
    const bytes = entry.info!.tensors.reduce((n, t) => n + t.nbytes, 0)
    if (bytes === 0) return
    this.unproven.set(entry.id, bytes)
    this.unprovenBytes += bytes
    // One object alone starts nothing, however large: it is most often the one the program is about
    // to read, which a collection now would find alive, and a program that releases each result by
    // hand would pay a collection per call of objects past half the allowance.
    if (this.unproven.size + this.marking.size < 2) return
    // Past half the allowance, a collection beside the program's work; past all of it, one at once.
    if (this.unprovenBytes + this.markingBytes > this.allowanceBytes || this.unproven.size + this.marking.size > MAX_UNPROVEN_OBJECTS) this.schedule()
    else if (!this.underWay && (this.unprovenBytes > this.allowanceBytes / 2 || this.unproven.size > MAX_UNPROVEN_OBJECTS / 2)) this.begin()
  }

  freed(entry: Entry): void {
    for (const map of [this.unproven, this.marking]) {
      const bytes = map.get(entry.id)
      if (bytes === undefined) continue
      map.delete(entry.id)
      if (map === this.unproven) this.unprovenBytes -= bytes
      else this.markingBytes -= bytes
    }
  }

  /**
   * Starts an incremental collection: the driver's main thread marks in small steps between its
   * jobs, the rest runs on V8's threads, and the pause that ends it is short. Objects made from now
   * on are marked alive by it, so they are counted afresh.
   */
  private begin(): void {
    this.underWay = true
    this.begun++
    this.round++
    this.marking = this.unproven
    this.markingBytes = this.unprovenBytes
    this.unproven = new Map()
    this.unprovenBytes = 0
    // The sentinel is made before the marking starts: made after, it would be marked alive.
    this.ended.register({}, this.round)
    if (!startMarking()) this.schedule()
  }

  /**
   * A full collection after the current job: the program's continuation of the result that crossed
   * the allowance has submitted its next call by then, so it overlaps the actors' work on it.
   */
  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      this.round++
      this.underWay = false
      this.unproven = new Map()
      this.unprovenBytes = 0
      this.marking = new Map()
      this.markingBytes = 0
      this.gc ??= fullCollection()
      this.gc()
      this.collected++
    })
  }
}
