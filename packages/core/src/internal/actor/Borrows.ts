/**
 * An actor's handles of objects the driver owns count as borrows with the owner: the first handle of
 * an object acquires one, the last one released drops it.
 */
import type { ClusterIdentity, RefTracker } from "../../ObjectRef.js"
import type { FromActor } from "../messages.js"

export class Borrows implements RefTracker {
  private readonly counts = new Map<string, number>()
  /** Objects this actor put: the owner counted the borrow when it registered them. */
  private readonly adopted = new Set<string>()
  /**
   * Drops wait until no call is running: a method may release a ref it put and still return it, and
   * the owner must see the result that names the object before the drop.
   */
  private readonly drops: Array<string> = []

  constructor(
    readonly cluster: ClusterIdentity,
    private readonly send: (message: FromActor) => void,
    /** Whether no call is running. */
    private readonly idle: () => boolean,
  ) {}

  adopt = (objectId: string): void => {
    this.adopted.add(objectId)
  }

  acquire = (objectId: string): void => {
    const n = this.counts.get(objectId) ?? 0
    this.counts.set(objectId, n + 1)
    if (n === 0 && !this.adopted.delete(objectId)) this.send({ _tag: "AddRefs", objectIds: [objectId] })
  }

  release = (objectId: string): void => {
    const n = (this.counts.get(objectId) ?? 0) - 1
    if (n > 0) {
      this.counts.set(objectId, n)
      return
    }
    this.counts.delete(objectId)
    this.drops.push(objectId)
    if (this.drops.length === 1) setImmediate(() => this.idle() && this.flush())
  }

  /** Sends the drops that waited for the running calls to end. */
  flush = (): void => {
    if (this.drops.length > 0) this.send({ _tag: "DropRefs", objectIds: this.drops.splice(0) })
  }
}
