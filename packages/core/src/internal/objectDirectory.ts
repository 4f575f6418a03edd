/**
 * The owner's object directory (in the driver): every object's state, where its primary copy lives
 * and who still needs it. An object is freed when its holders (driver handles, actor borrows, calls
 * that take it as an argument, objects whose value contains its ref) drop to zero.
 */
import { ObjectFreedError, TimeoutError } from "../Errors.js"
import type { ObjectInfo } from "./messages.js"
import { limitTimer } from "./arguments.js"

export interface Entry {
  readonly id: string
  /** Actor id of the producer, or "driver". */
  readonly producer: string
  readonly transport: string
  /** The producer's method that makes it (absent for puts). */
  readonly method?: string
  state: "pending" | "ready" | "failed"
  info: ObjectInfo | undefined
  error: Error | undefined
  holders: number
  /** Borrows per actor, dropped all at once if that actor dies. */
  readonly borrowers: Map<string, number>
  /** Actors that keep a received copy until the object is freed (placed there by cluster.broadcast). */
  readonly copies: Set<string>
  /** Actors whose calls took it as an argument. */
  readonly takers: Set<string>
  readonly waiters: Array<() => void>
}

export class ObjectDirectory {
  private readonly entries = new Map<string, Entry>()

  constructor(
    private readonly onFree: (entry: Entry) => void,
    /** Hears of every object that becomes ready, before a waiter does. */
    private readonly onReady: (entry: Entry) => void = () => {},
    /** Hears of every object made (a call's result, or a put), before it is entered. */
    private readonly onCreate: () => void = () => {},
  ) {}

  create(id: string, producer: string, transport: string, method?: string): Entry {
    this.onCreate()
    const entry: Entry = {
      id,
      producer,
      ...(method !== undefined ? { method } : {}),
      transport,
      state: "pending",
      info: undefined,
      error: undefined,
      holders: 0,
      borrowers: new Map(),
      copies: new Set(),
      takers: new Set(),
      waiters: [],
    }
    this.entries.set(id, entry)
    return entry
  }

  get(id: string): Entry | undefined {
    return this.entries.get(id)
  }

  require(id: string): Entry {
    const entry = this.entries.get(id)
    if (entry === undefined) {
      throw new ObjectFreedError({ message: `object ${id} was released, or never existed in this cluster`, objectId: id })
    }
    return entry
  }

  values(): IterableIterator<Entry> {
    return this.entries.values()
  }

  get size(): number {
    return this.entries.size
  }

  ready(entry: Entry, info: ObjectInfo): void {
    if (entry.state !== "pending") return
    entry.state = "ready"
    entry.info = info
    // Refs inside the value stay alive as long as the value does.
    for (const inner of info.refs) this.acquire(inner)
    this.onReady(entry)
    this.settle(entry)
  }

  fail(entry: Entry, error: Error): void {
    if (entry.state === "failed") return
    const wasReady = entry.state === "ready"
    entry.state = "failed"
    entry.error = error
    if (wasReady) return
    this.settle(entry)
  }

  private settle(entry: Entry): void {
    for (const wake of entry.waiters.splice(0)) wake()
    if (entry.holders === 0) this.free(entry)
  }

  acquire(id: string, borrower?: string): void {
    const entry = this.entries.get(id)
    if (entry === undefined) return
    entry.holders++
    if (borrower !== undefined) entry.borrowers.set(borrower, (entry.borrowers.get(borrower) ?? 0) + 1)
  }

  release(id: string, borrower?: string): void {
    const entry = this.entries.get(id)
    if (entry === undefined) return
    if (borrower !== undefined) {
      const n = entry.borrowers.get(borrower) ?? 0
      if (n === 0) return
      if (n === 1) entry.borrowers.delete(borrower)
      else entry.borrowers.set(borrower, n - 1)
    }
    entry.holders--
    if (entry.holders <= 0 && entry.state !== "pending") this.free(entry)
  }

  /** Forgets every borrow of a dead actor. */
  dropBorrower(actorId: string): void {
    for (const entry of [...this.entries.values()]) {
      const n = entry.borrowers.get(actorId)
      if (n === undefined) continue
      for (let i = 0; i < n; i++) this.release(entry.id, actorId)
    }
  }

  private free(entry: Entry): void {
    if (!this.entries.has(entry.id)) return
    this.entries.delete(entry.id)
    for (const wake of entry.waiters.splice(0)) wake()
    this.onFree(entry)
    if (entry.info !== undefined) for (const inner of entry.info.refs) this.release(inner)
  }

  /** Resolves with the entry once it is ready or failed; rejects after `timeoutMs`. */
  wait(entry: Entry, timeoutMs: number): Promise<Entry> {
    if (entry.state !== "pending") return Promise.resolve(entry)
    return new Promise((resolve, reject) => {
      const timer = limitTimer(timeoutMs, () => {
        const i = entry.waiters.indexOf(wake)
        if (i >= 0) entry.waiters.splice(i, 1)
        reject(new TimeoutError({ message: `object ${entry.id} was not ready within ${timeoutMs} ms`, timeoutMs }))
      })
      const wake = () => {
        clearTimeout(timer)
        resolve(entry)
      }
      entry.waiters.push(wake)
    })
  }
}
