/**
 * Refs the driver's code drops without releasing them: the directory hears of them only once the
 * driver's garbage collector finds them dead (ObjectRef's FinalizationRegistry), and a driver that
 * makes little garbage of its own may not run a full collection for minutes, while the producers
 * keep every object. JavaScript cannot tell a dropped ref from a held one without a collection, so
 * the driver counts what the objects made since its last collection still hold at their producers;
 * past an allowance, it collects, and whatever the program dropped is freed. An object released by
 * hand leaves the count at once: a program that releases its refs never collects here.
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
 * The allowance of bytes for a host cache of `capacity` bytes: a quarter of it, so that the frees a
 * collection brings reach a producer before its cache runs out of blocks (HostMemoryCache lets up to
 * half of the cache be out per size before it collects on the spot).
 */
export const droppedRefAllowance = (capacity: number): number => Math.max(MIN_ALLOWANCE_BYTES, Math.floor(capacity / 4))

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

export class DroppedRefs {
  /** Bytes of each object made since the last collection and still alive. */
  private unproven = new Map<string, number>()
  private unprovenBytes = 0
  private scheduled = false
  private gc: (() => void) | undefined
  private collected = 0

  constructor(private readonly allowanceBytes: number) {}

  /** Collections run so far. */
  get collections(): number {
    return this.collected
  }

  /** An object is ready: its tensors are held by its producer until it is freed. */
  made(entry: Entry): void {
    const bytes = entry.info!.tensors.reduce((n, t) => n + t.nbytes, 0)
    if (bytes === 0) return
    this.unproven.set(entry.id, bytes)
    this.unprovenBytes += bytes
    if (this.unprovenBytes > this.allowanceBytes || this.unproven.size > MAX_UNPROVEN_OBJECTS) this.schedule()
  }

  freed(entry: Entry): void {
    const bytes = this.unproven.get(entry.id)
    if (bytes === undefined) return
    this.unproven.delete(entry.id)
    this.unprovenBytes -= bytes
  }

  /**
   * After the current job: the program's continuation of the result that crossed the allowance has
   * submitted its next call by then, so the collection overlaps the actors' work on it.
   */
  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      this.unproven = new Map()
      this.unprovenBytes = 0
      this.gc ??= fullCollection()
      this.gc()
      this.collected++
    })
  }
}
