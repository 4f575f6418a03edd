/**
 * The per-process store: primary copies of the objects this process produced (kept until the owner
 * frees them) and the copies it received for the calls that are running.
 */
import { cpuAllocator } from "./CpuMemory.js"
import { TimeoutError } from "./Errors.js"
import type { Tensor } from "./Tensor.js"
import { limitTimer } from "./internal/arguments.js"

export interface StoredObject {
  readonly objectId: string
  readonly transport: string
  /** The value as the method returned it: a ref passed back to its producer gets these very tensors. */
  readonly value: unknown
  readonly tensors: ReadonlyArray<Tensor>
  /** What its transport holds and moves: `tensors`, or a block of the small ones packed and the rest (packing.ts). */
  readonly travelling: ReadonlyArray<Tensor>
}

export class TensorStore {
  private readonly primary = new Map<string, StoredObject>()
  private readonly received = new Map<string, { value: unknown; tensors: ReadonlyArray<Tensor>; users: number; pinned: boolean }>()
  /** Live objects per storage, for waitTensorFreed: in-place writes to any view of a storage are visible. */
  private readonly storageUsers = new Map<number, number>()
  private readonly freedWaiters = new Map<number, Array<() => void>>()
  /** Bytes of default host memory dropped since `takeDroppedHostBytes`: what a collection may now recycle. */
  private droppedHostBytes = 0

  addPrimary(object: StoredObject): void {
    this.primary.set(object.objectId, object)
    for (const id of storageIds(object.tensors)) this.storageUsers.set(id, (this.storageUsers.get(id) ?? 0) + 1)
  }

  getPrimary(objectId: string): StoredObject | undefined {
    return this.primary.get(objectId)
  }

  /** Drops a primary copy; returns it so that the transport can release what it registered. */
  freePrimary(objectId: string): StoredObject | undefined {
    const object = this.primary.get(objectId)
    if (object === undefined) return undefined
    this.primary.delete(objectId)
    this.noteDropped([...object.tensors, ...object.travelling])
    for (const id of storageIds(object.tensors)) {
      const users = (this.storageUsers.get(id) ?? 1) - 1
      if (users > 0) {
        this.storageUsers.set(id, users)
        continue
      }
      this.storageUsers.delete(id)
      const waiters = this.freedWaiters.get(id) ?? []
      this.freedWaiters.delete(id)
      for (const wake of waiters) wake()
    }
    return object
  }

  holdReceived(objectId: string, value: unknown, tensors: ReadonlyArray<Tensor>): void {
    const entry = this.received.get(objectId)
    if (entry !== undefined) entry.users++
    else this.received.set(objectId, { value, tensors, users: 1, pinned: false })
  }

  dropReceived(objectId: string): void {
    const entry = this.received.get(objectId)
    if (entry === undefined) return
    if (--entry.users === 0 && !entry.pinned) this.deleteReceived(objectId, entry.tensors)
  }

  /** Keeps a received copy until the owner frees the object (a broadcast placed it here ahead of its calls). */
  pinReceived(objectId: string, value: unknown, tensors: ReadonlyArray<Tensor>): void {
    const entry = this.received.get(objectId)
    if (entry !== undefined) entry.pinned = true
    else this.received.set(objectId, { value, tensors, users: 0, pinned: true })
  }

  /** The pinned copy of an object, if a broadcast placed one here. */
  pinnedValue(objectId: string): { value: unknown; tensors: ReadonlyArray<Tensor> } | undefined {
    const entry = this.received.get(objectId)
    return entry?.pinned ? entry : undefined
  }

  unpinReceived(objectId: string): void {
    const entry = this.received.get(objectId)
    if (entry === undefined) return
    entry.pinned = false
    if (entry.users === 0) this.deleteReceived(objectId, entry.tensors)
  }

  private deleteReceived(objectId: string, tensors: ReadonlyArray<Tensor>): void {
    this.received.delete(objectId)
    this.noteDropped(tensors)
  }

  private noteDropped(tensors: ReadonlyArray<Tensor>): void {
    // Views of one storage hold its memory once.
    const storages = new Map(tensors.map((t) => [t.storage.id, t.storage]))
    for (const storage of storages.values()) if (storage.allocator === cpuAllocator) this.droppedHostBytes += storage.byteLength
  }

  /** Host bytes dropped since the last call (then none): whether a garbage collection may recycle memory now. */
  takeDroppedHostBytes(): number {
    const bytes = this.droppedHostBytes
    this.droppedHostBytes = 0
    return bytes
  }

  /** Resolves once no stored object uses the tensor's memory any more. */
  waitTensorFreed(tensor: Tensor, timeoutMs: number): Promise<void> {
    const id = tensor.storage.id
    if (!this.storageUsers.has(id)) return Promise.resolve()
    return new Promise((resolve, reject) => {
      const timer = limitTimer(timeoutMs, () => {
        const waiters = this.freedWaiters.get(id) ?? []
        this.freedWaiters.set(id, waiters.filter((w) => w !== wake))
        reject(new TimeoutError({ message: `tensor still referenced by an object after ${timeoutMs} ms`, timeoutMs }))
      })
      const wake = () => {
        clearTimeout(timer)
        resolve()
      }
      const waiters = this.freedWaiters.get(id) ?? []
      waiters.push(wake)
      this.freedWaiters.set(id, waiters)
    })
  }

  inspect(): { primary: Array<string>; received: Array<string> } {
    return { primary: [...this.primary.keys()], received: [...this.received.keys()] }
  }

}

const storageIds = (tensors: ReadonlyArray<Tensor>): Set<number> => new Set(tensors.map((t) => t.storage.id))
