/** The host memory cache behind the default CPU allocator (see HostMemoryCache). */
import { totalmem } from "node:os"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { integerSetting, readSetting } from "../Settings.js"
import { currentJob } from "./job.js"

/** Storages below this size are not worth recycling: fresh small allocations are cheap (and travel packed, packing.ts). */
export const RECYCLE_MIN_BYTES = 1 << 20

/** Blocks of one size out (alive, or dead and unproven) before a miss collects, at first (see HostMemoryCache). */
const FIRST_BLOCKS_OUT = 2
/** Blocks of one size that may be out once it has climbed there, where the cache holds them (see mostBlocksOut). */
const BASE_BLOCKS_OUT = 16
/** Past BASE_BLOCKS_OUT blocks each, the blocks of all sizes out may hold this many bytes together. */
const MOST_BYTES_OUT = 128 * 2 ** 20
/**
 * How many bytes of SharedArrayBuffers the cache does not track (below RECYCLE_MIN_BYTES, the cache
 * off, or past a job's share: see HostMemoryCache.take) are made, at least, between two looks at
 * their memory (collectUntracked): V8 counts no SharedArrayBuffer's memory towards its heuristics, so
 * without collections of the cache's own their garbage can pile up.
 */
const UNTRACKED_COLLECT_BYTES = 64 * 2 ** 20
/** A size not taken in this many allocations (of any size) no longer holds its share of MOST_BYTES_OUT. */
const STALE_TAKES = 1024
/** Sizes up to this one double their allowance at each idle collection instead of adding one block. */
const DOUBLING_MAX_BYTES = 16 * 2 ** 20
/**
 * The other sizes in use: the bytes their allowances let out past BASE_BLOCKS_OUT each (`pastBase`),
 * and the bytes their calls hold at once (`perCall`: their blocks a call holds, at least one, each).
 */
interface Others {
  readonly pastBase: number
  readonly perCall: number
}

/**
 * The most blocks of one size out before a miss collects: BASE_BLOCKS_OUT, or as many as
 * MOST_BYTES_OUT holds when more (128 of 1 MiB), less what the other sizes' blocks past their base
 * hold; for a size of which a call holds several blocks at once (`perCall`), up to BASE_BLOCKS_OUT
 * calls' worth within its part of the cache's capacity, the sizes in use sharing it in proportion to
 * the bytes their calls hold (512 of 2 MiB for calls of 32 in a default cache of 1 GiB, alone; 256
 * beside calls of one 64 MiB block, which keeps its BASE_BLOCKS_OUT: sizes past their parts by those
 * floors still push each other's idle blocks out, as before); never more than the cache holds (16 of
 * 64 MiB, 4 of 256 MiB by default), and at least 2. Each idle collection then turns all but a call's
 * worth of them into idle blocks, which the cache keeps: a loop of results collects once per
 * allowance (a full collection of the actor's heap, 10 to 20 ms), so the fewer collections, the less
 * of the loop's time they take.
 */
const mostBlocksOut = (byteLength: number, capacity: number, others: Others, perCall: number): number =>
  Math.max(
    FIRST_BLOCKS_OUT,
    Math.min(
      Math.floor(capacity / byteLength),
      Math.max(
        BASE_BLOCKS_OUT,
        Math.floor((MOST_BYTES_OUT - others.pastBase) / byteLength),
        perCall === 0 ? 0 : Math.min(BASE_BLOCKS_OUT * perCall, Math.floor((capacity * perCall) / (perCall * byteLength + others.perCall))),
      ),
    ),
  )

/**
 * The allowance after an idle collection found `blocksOut` blocks of a size out: one block more, or
 * twice as many for blocks of DOUBLING_MAX_BYTES or less (a fresh one costs a few ms of page faults,
 * less than the collections a slow climb to their allowance would take), up to `mostBlocksOut`.
 */
const raisedAllowance = (byteLength: number, blocksOut: number, capacity: number, others: Others, perCall: number): number =>
  Math.min(mostBlocksOut(byteLength, capacity, others, perCall), byteLength <= DOUBLING_MAX_BYTES ? blocksOut * 2 : blocksOut + 1)

/** A size alone in the cache. */
const NO_OTHERS: Others = { pastBase: 0, perCall: 0 }

/**
 * The allocations of `byteLength` bytes, one after another and each dropped, that a fresh cache of
 * this process's capacity takes at least to let its whole allowance of that size circulate (the idle
 * collections on the way raise it step by step, taking fresh pages meanwhile; a collection that
 * would not pay for itself yet comes later): how long a benchmark warms a size up before timing it.
 */
export const hostMemoryWarmCalls = (byteLength: number): number => {
  const capacity = recycleCapacity()
  if (byteLength < RECYCLE_MIN_BYTES || capacity === 0) return 0
  const most = mostBlocksOut(byteLength, capacity, NO_OTHERS, 1)
  let calls = most
  for (let blocks = FIRST_BLOCKS_OUT; blocks < most; blocks = raisedAllowance(byteLength, blocks, capacity, NO_OTHERS, 1)) calls += blocks
  return calls
}

/**
 * How long a measured collection time stands for the next one: a second, or this many times that
 * collection's own time where longer, so that measuring again a collection too slow to pay (a program
 * with a large heap of its own) takes at most a twentieth of the process's time.
 */
const STALE_ESTIMATE_MS = 1000
const STALE_ESTIMATE_RATIO = 20

/** The cache's capacity in bytes (TENSORLANE_HOST_CACHE_BYTES), read now. */
export const recycleCapacity = (): number =>
  readSetting(integerSetting("TENSORLANE_HOST_CACHE_BYTES", { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: Math.min(2 ** 30, totalmem() / 16), unit: "bytes" }))

/** A SharedArrayBuffer handed out, and the second object over its memory that the cache keeps. */
interface Lent {
  readonly handed: WeakRef<SharedArrayBuffer>
  readonly keeper: SharedArrayBuffer
  /** The collections run before it was handed out. */
  readonly collectionsBefore: number
}

/** V8's `gc`: a full collection, or a minor one with `{ type: "minor" }`. */
type Collect = (options?: { readonly type: "minor" | "major" }) => void

/** The collection V8 exposed at run time, once looked for: `null` before, `undefined` where it refused. */
let exposedAtRunTime: Collect | undefined | null = null

/**
 * The garbage collection of this process (`gc()` a full one, `gc({ type: "minor" })` a minor one
 * where it is V8's own): `gc` where it runs with --expose-gc (tensorlane starts
 * actor processes so); else, in a program's own process (the driver, seldom started with it), the one
 * V8 exposes to a context made while the flag is turned on at run time; else none, said once by a
 * process warning (its dropped refs and host memory then wait for the program's own collections).
 */
export const forceGc = (): Collect | undefined => {
  const own = (globalThis as { gc?: Collect }).gc
  if (own !== undefined) return own
  if (exposedAtRunTime === null) exposedAtRunTime = exposeGc()
  return exposedAtRunTime
}

/** `gc` as a new context sees it: there where the flag is on (the process started with it, and `globalThis.gc` went). */
const contextGc = (): unknown => runInNewContext("typeof gc === 'function' ? gc : undefined")

const exposeGc = (): Collect | undefined => {
  let gc: unknown = contextGc()
  if (gc === undefined) {
    // V8 exposes `gc` only to contexts made while the flag is on: on for one, then off as it was.
    try {
      setFlagsFromString("--expose-gc")
      gc = contextGc()
    } catch {
      gc = undefined
    } finally {
      setFlagsFromString("--no-expose-gc")
    }
  }
  if (typeof gc === "function") return gc as Collect
  process.emitWarning("tensorlane: V8 exposes no garbage collection here: dropped refs and host memory wait for the program's own collections", {
    code: "TENSORLANE_NO_GC",
  })
  return undefined
}

/**
 * Recycles the memory of large host storages once the garbage collector has proven that nothing can
 * reach it (no tensor, storage or typed array holds its SharedArrayBuffer any more). Touching fresh
 * pages costs more than the copy into them, so a transfer loop that allocates a receive buffer each
 * time would run at the speed of page faults. The cache keeps a second SharedArrayBuffer object over
 * the same memory (structured clone shares it); a FinalizationRegistry returns it when the handed
 * object dies, and after a collection WeakRefs tell at once which memory is free again.
 *
 * Collections belong to idle moments (`collectIdle`: an actor calls it after a call that dropped large
 * tensors, and while a call waits for a receive, so that a producer and its consumer collect on the
 * same call of a loop), and each costs the same whatever it frees, so they wait until an allocation
 * would miss. A loop that frees a result and at once allocates the next cannot wait for one, so a
 * miss takes fresh memory while fewer than a size's allowance of blocks are out; an idle collection
 * runs once a size has its allowance out and none idle, recycles all but the one still held, and
 * raises that size's allowance (`raisedAllowance`, from 2 up to `mostBlocksOut`): a long loop of
 * results ends up collecting once per allowance (2 to 128 blocks) instead of after each call, while a
 * short one pays for few fresh blocks. Beyond its allowance, a miss collects on the spot, which bounds
 * the memory to what the program really holds; one that finds nothing of the size dead pauses them for
 * an allowance of allocations, each such pause twice the last up to the cache's worth of the size,
 * until the process reports a drop. A process that reports no idle moments (the driver, receiving
 * results) raises its allowances at those collections instead, or it would collect at every
 * allocation of a size once two of its blocks are out. It also weighs each of them against the page
 * faults of all the size's blocks out, which it may recycle, not of one.
 */
class HostMemoryCache {
  private readonly idle = new Map<number, Array<SharedArrayBuffer>>()
  private readonly lent = new Map<number, Set<Lent>>()
  private idleBytes = 0
  private readonly capacity = recycleCapacity()
  /** When each size was last taken (a count of takes), to let the stalest sizes go first. */
  private readonly lastTaken = new Map<number, number>()
  private takes = 0
  /** Blocks of each size that may be out before a miss collects. */
  private readonly allowance = new Map<number, number>()
  /**
   * Blocks of each size that the last collection found held among those handed out since the one
   * before: what a call holds at once. Idle moments come while a call holds its blocks (a producer's
   * result until the driver frees it, a consumer's receive), so a call of many blocks of a size gets
   * as many calls' worth out as a call of one block does (see mostBlocksOut), or it would fill its
   * allowance in two calls and collect at every call to recycle half of it.
   */
  private readonly perCall = new Map<number, number>()
  private collections = 0
  /** Bytes the process dropped since the last collection. */
  private droppedBytes = 0
  private lastCollectMs = 0
  private lastCollectAt = 0
  /** Whether the process has reported an idle moment (an actor, from its first call's end; never the driver). */
  private reportsIdle = false
  /**
   * No collection on the spot for a size before `until` takes: the last one found none of it dead;
   * the pause, `takes` long, is twice the last one's (see collectOnTheSpot).
   */
  private readonly spotPaused = new Map<number, { readonly until: number; readonly takes: number }>()
  private readonly released = new FinalizationRegistry<Lent>((lent) => this.reclaim(lent))
  /**
   * Bytes the cache handed out in job `job`, and blocks of each size: no collection proves them dead
   * before it ends (see currentJob). A loop that never yields would otherwise hold every block it
   * drops; past the cache's capacity in one job, blocks go out untracked (the cache could not keep
   * them idle anyway), and collections free them (collectUntracked).
   */
  private job = -1
  private jobBytes = 0
  private readonly jobTakes = new Map<number, number>()
  /** Bytes of untracked SharedArrayBuffers made since the last look at their memory, and how many make the next look due. */
  private untrackedBytes = 0
  private untrackedDue = UNTRACKED_COLLECT_BYTES
  /** The least untracked memory any look found since the last collection (see collectUntracked). */
  private untrackedLeast: number | undefined = undefined

  /**
   * Collects now, when the process is idle, so that the memory dropped since the last collection
   * waits, warm, for the next large allocation; only when an allocation would otherwise miss.
   */
  collectIdle(droppedBytes: number): void {
    this.droppedBytes += droppedBytes
    this.reportsIdle = true
    // What the process dropped may be what a paused size's collection found held.
    if (droppedBytes > 0) this.spotPaused.clear()
    const short = this.sizesRunningOut()
    if (short.length === 0 || !this.worthCollecting(this.droppedBytes)) return
    const gc = forceGc()
    if (gc === undefined) return
    this.runCollection(gc)
    this.reclaimDead()
    this.raise(short)
  }

  /** Sizes that ran out may have one step more out (see raisedAllowance); stale ones give their share back. */
  private raise(sizes: ReadonlyArray<number>): void {
    this.trimStaleShares(sizes)
    for (const byteLength of sizes) {
      this.allowance.set(byteLength, raisedAllowance(byteLength, this.blocksOut(byteLength), this.capacity, this.others(byteLength), this.perCall.get(byteLength) ?? 0))
    }
  }

  /**
   * A collection pays when it costs less than faulting in the pages it may recycle (taken as 2 GB/s).
   * One slow collection (a busy machine) must not rule them out for good: the estimate is measured
   * again once stale (STALE_ESTIMATE_MS, or STALE_ESTIMATE_RATIO times that collection's time).
   */
  private worthCollecting(bytes: number): boolean {
    if (bytes < RECYCLE_MIN_BYTES) return false
    const stands = Math.max(STALE_ESTIMATE_MS, STALE_ESTIMATE_RATIO * this.lastCollectMs)
    return this.lastCollectMs <= bytes / 2e6 || performance.now() - this.lastCollectAt > stands
  }

  /** What the sizes other than `byteLength` claim of the cache (see Others). */
  private others(byteLength: number): Others {
    let pastBase = 0
    let perCall = 0
    for (const [size, blocks] of this.allowance) {
      if (size === byteLength) continue
      if (blocks > BASE_BLOCKS_OUT) pastBase += (blocks - BASE_BLOCKS_OUT) * size
      // A size the program moved on from, or one the cache cannot keep idle, claims no part of it.
      if (!this.stale(size) && size <= this.capacity) perCall += Math.min(this.capacity, Math.max(1, this.perCall.get(size) ?? 0) * size)
    }
    return { pastBase, perCall }
  }

  private stale(byteLength: number): boolean {
    return this.takes - (this.lastTaken.get(byteLength) ?? 0) > STALE_TAKES
  }

  /** Sizes not taken in the last STALE_TAKES allocations, but those being raised, give their share back (the program moved on). */
  private trimStaleShares(raising: ReadonlyArray<number>): void {
    for (const size of this.allowance.keys()) {
      if (!raising.includes(size) && this.stale(size)) this.trimToBase(size)
    }
  }

  /** A size's allowance past BASE_BLOCKS_OUT goes back to the others. */
  private trimToBase(byteLength: number): void {
    const blocks = this.allowance.get(byteLength)
    if (blocks !== undefined && blocks > BASE_BLOCKS_OUT) this.allowance.set(byteLength, BASE_BLOCKS_OUT)
  }

  private blocksOut(byteLength: number): number {
    return this.allowance.get(byteLength) ?? FIRST_BLOCKS_OUT
  }

  /** Sizes with their allowance of blocks out and none idle: their next allocation would miss. */
  private sizesRunningOut(): Array<number> {
    return [...this.lent].filter(([byteLength, set]) => set.size >= this.blocksOut(byteLength) && (this.idle.get(byteLength)?.length ?? 0) === 0).map(([byteLength]) => byteLength)
  }

  private runCollection(gc: Collect): void {
    const started = performance.now()
    this.droppedBytes = 0
    gc()
    this.lastCollectAt = performance.now()
    this.lastCollectMs = this.lastCollectAt - started
    this.untrackedBytes = 0
    this.untrackedLeast = undefined
    this.untrackedDue = Math.max(UNTRACKED_COLLECT_BYTES, this.lastCollectMs * 2e6)
  }

  /**
   * The ArrayBuffer memory of this thread's isolate but the cache's blocks: untracked
   * SharedArrayBuffers, dead or alive, and the buffers V8 counts itself (a buffer made here and
   * dropped in another thread counts here alone); undefined where the process cannot say (reading
   * its resident memory too, it fails without a free file descriptor).
   */
  private untrackedHeld(): number | undefined {
    let arrayBuffers: number
    try {
      arrayBuffers = process.memoryUsage().arrayBuffers
    } catch {
      return undefined
    }
    let lentBytes = 0
    for (const [byteLength, set] of this.lent) lentBytes += byteLength * set.size
    return arrayBuffers - this.idleBytes - lentBytes
  }

  /**
   * Counts an untracked SharedArrayBuffer of `byteLength` bytes. Each time they add up to
   * `untrackedDue` (what a collection's time would fault in, at least UNTRACKED_COLLECT_BYTES, as V8
   * collects for ArrayBuffers every 64 MB of them), it looks at the memory they hold, and collects
   * once that grew by half of `untrackedDue` past the least any look found since the last collection
   * (where the process cannot say, at every look). Where V8's scavenges free them as they go, the
   * memory does not grow; where they free some, it grows more slowly. The least look, not the first:
   * one soon after a collection may still count garbage that V8 had not freed yet.
   */
  private collectUntracked(byteLength: number): void {
    this.untrackedBytes += byteLength
    if (this.untrackedBytes < this.untrackedDue) return
    this.untrackedBytes = 0
    const held = this.untrackedHeld()
    if (held !== undefined) {
      const least = Math.min(held, this.untrackedLeast ?? held)
      this.untrackedLeast = least
      if (held - least < this.untrackedDue / 2) return
    }
    const gc = forceGc()
    if (gc === undefined) return
    this.runCollection(gc)
    // V8 may leave freeing the memory of the buffers it found dead to a task, which a loop that never
    // yields never lets run (a worker thread's, for one); the next collection finishes it first.
    gc({ type: "minor" })
    // Only what it proved dead: the blocks a call holds are counted at the collections around calls (reclaimDead).
    this.reclaimDeadBlocks()
  }

  /** Bytes and blocks of `byteLength` the cache handed out in the current job. */
  private inThisJob(byteLength: number): { readonly bytes: number; readonly blocks: number } {
    const job = currentJob()
    if (job !== this.job) {
      this.job = job
      this.jobBytes = 0
      this.jobTakes.clear()
    }
    return { bytes: this.jobBytes, blocks: this.jobTakes.get(byteLength) ?? 0 }
  }

  /**
   * After a collection: what it just proved dead is made idle now (the registry's callbacks run later,
   * as a task), and what it found held of the blocks handed out since the one before is counted.
   */
  private reclaimDead(): void {
    this.reclaimDeadBlocks()
    for (const [byteLength, set] of this.lent) {
      let sinceLast = 0
      for (const lent of set) if (lent.collectionsBefore === this.collections) sinceLast++
      this.perCall.set(byteLength, sinceLast)
    }
    this.collections++
  }

  private reclaimDeadBlocks(): void {
    for (const set of this.lent.values()) {
      for (const lent of set) if (lent.handed.deref() === undefined) this.reclaim(lent)
    }
  }

  /** Whether a block of `byteLength` would take the current job past the cache's capacity (its first block never does: one larger than the cache is recycled on the spot). */
  private pastJobShare(byteLength: number): boolean {
    const { bytes } = this.inThisJob(byteLength)
    return bytes > 0 && bytes + byteLength > this.capacity
  }

  take(byteLength: number): SharedArrayBuffer {
    if (byteLength < RECYCLE_MIN_BYTES || this.capacity === 0 || this.pastJobShare(byteLength)) {
      this.collectUntracked(byteLength)
      return new SharedArrayBuffer(byteLength)
    }
    this.lastTaken.set(byteLength, ++this.takes)
    // Collect before looking: a WeakRef looked at keeps its target alive until the current job ends.
    const keeper = this.idleOne(byteLength) ?? this.collectOnTheSpot(byteLength)
    this.jobBytes += byteLength
    this.jobTakes.set(byteLength, (this.jobTakes.get(byteLength) ?? 0) + 1)
    const memory = keeper ?? new SharedArrayBuffer(byteLength)
    const handed = keeper === undefined ? memory : structuredClone(memory)
    const lent: Lent = { handed: new WeakRef(handed), keeper: keeper ?? structuredClone(memory), collectionsBefore: this.collections }
    this.lentOf(byteLength).add(lent)
    this.released.register(handed, lent)
    return handed
  }

  /**
   * Lets idle blocks of other sizes go, those taken longest ago first, until `byteLength` fits: a
   * program that moved on to another size would otherwise keep the cache full of sizes it no
   * longer asks for, and pay page faults for every block of the size it does.
   */
  private makeRoom(byteLength: number): void {
    while (this.idleBytes + byteLength > this.capacity) {
      let stalest: Array<SharedArrayBuffer> | undefined
      let stalestTaken = Infinity
      for (const [size, list] of this.idle) {
        const taken = this.lastTaken.get(size) ?? 0
        if (size !== byteLength && list.length > 0 && taken < stalestTaken) {
          stalest = list
          stalestTaken = taken
        }
      }
      const evicted = stalest?.pop()
      if (evicted === undefined) return
      this.idleBytes -= evicted.byteLength
      // A size that no longer fits idle gives its share of MOST_BYTES_OUT back, and keeps its base.
      this.trimToBase(evicted.byteLength)
    }
  }

  private lentOf(byteLength: number): Set<Lent> {
    let set = this.lent.get(byteLength)
    if (set === undefined) this.lent.set(byteLength, (set = new Set()))
    return set
  }

  private idleOne(byteLength: number): SharedArrayBuffer | undefined {
    const keeper = this.idle.get(byteLength)?.pop()
    if (keeper !== undefined) this.idleBytes -= byteLength
    return keeper
  }

  /**
   * A miss with the size's allowance out: a collection if it pays, and a block of the size it proved
   * dead, handed out as is (it may be larger than what the cache keeps idle); the others it proved
   * dead become idle. One that finds none of the size dead (the program holds them) is not tried
   * again for an allowance's worth of allocations, twice that after another such, and so on up to as
   * many blocks as the cache holds (the fresh blocks a pause takes wait for the next collection:
   * V8 counts no SharedArrayBuffer's memory towards its own), or until the process reports a drop: a
   * program keeping its results pays a collection per cache's worth of them, not one per allowance.
   */
  private collectOnTheSpot(byteLength: number): SharedArrayBuffer | undefined {
    const paused = this.spotPaused.get(byteLength)
    if (this.takes < (paused?.until ?? 0)) return undefined
    const out = this.lent.get(byteLength)?.size ?? 0
    // Blocks taken in this job stay alive until it ends: a collection could prove none of them dead.
    if (this.inThisJob(byteLength).blocks >= out) return undefined
    // Where idle moments come, a collection on the spot means frees lagging behind the allocations
    // (objects whose refs the driver has not proven dropped yet): it pays for the block it hands out.
    // Where none come (the driver), it is the only kind: it may recycle every block of the size out,
    // as many as the cache keeps and the one it hands out.
    const recyclable = this.reportsIdle ? byteLength : Math.min(out * byteLength, this.capacity + byteLength)
    if (out < this.blocksOut(byteLength) || !this.worthCollecting(recyclable)) return undefined
    const gc = forceGc()
    if (gc === undefined) return undefined
    this.runCollection(gc)
    const keeper = this.deadOne(byteLength)
    this.reclaimDead()
    // Where idle moments come, more blocks out would only hold more.
    if (!this.reportsIdle) this.raise([byteLength])
    if (keeper === undefined) {
      const longest = Math.max(this.blocksOut(byteLength), Math.floor(this.capacity / byteLength))
      const takes = paused === undefined ? this.blocksOut(byteLength) : Math.min(2 * paused.takes, longest)
      this.spotPaused.set(byteLength, { until: this.takes + takes, takes })
    }
    return keeper
  }

  private deadOne(byteLength: number): SharedArrayBuffer | undefined {
    const set = this.lent.get(byteLength)
    if (set === undefined) return undefined
    for (const lent of set) {
      if (lent.handed.deref() !== undefined) continue
      set.delete(lent)
      return lent.keeper
    }
    return undefined
  }

  private reclaim(lent: Lent): void {
    const byteLength = lent.keeper.byteLength
    if (!this.lent.get(byteLength)?.delete(lent)) return
    this.makeRoom(byteLength)
    if (this.idleBytes + byteLength > this.capacity) return
    const list = this.idle.get(byteLength) ?? []
    list.push(lent.keeper)
    this.idle.set(byteLength, list)
    this.idleBytes += byteLength
  }
}

export const hostMemory = new HostMemoryCache()

/**
 * For a process's idle moments, after it dropped tensors of `droppedBytes` (tensorlane's actors call
 * it once no call runs after a free, or after a call that received copies): collects garbage now if
 * that is cheaper than faulting that much fresh memory in, so that the memory waits, warm, for the
 * next allocation instead of costing a collection (or page faults) on its critical path.
 */
export const recycleHostMemory = (droppedBytes: number): void => hostMemory.collectIdle(droppedBytes)
