/**
 * A reference to the value of a method call or a put. The driver owns every object; a ref held in
 * an actor is a borrowed handle that keeps the object alive until it is released or collected.
 */
const brand = Symbol.for("tensorlane.ObjectRef")

/** Who counts the handles of a process: the owner's directory in the driver, a borrow ledger in actors. */
export interface RefTracker {
  readonly acquire: (objectId: string) => void
  readonly release: (objectId: string) => void
}

const collected = new FinalizationRegistry<{ tracker: RefTracker; objectId: string }>(({ tracker, objectId }) =>
  tracker.release(objectId),
)

export class ObjectRef<out T = unknown> implements Disposable {
  declare readonly _value: T
  readonly [brand] = true
  #tracker: RefTracker | undefined

  /** @internal refs are created by the runtime (method calls, put, values that carry refs). */
  constructor(
    readonly id: string,
    tracker: RefTracker,
  ) {
    this.#tracker = tracker
    tracker.acquire(id)
    collected.register(this, { tracker, objectId: id }, this)
  }

  get released(): boolean {
    return this.#tracker === undefined
  }

  /** Drops this handle; the object is freed once no handle, consumer or pending call needs it. Idempotent. */
  release(): void {
    const tracker = this.#tracker
    if (tracker === undefined) return
    this.#tracker = undefined
    collected.unregister(this)
    tracker.release(this.id)
  }

  [Symbol.dispose](): void {
    this.release()
  }

  toString(): string {
    return `ObjectRef(${this.id})`
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString()
  }
}

export const isObjectRef = (value: unknown): value is ObjectRef<unknown> =>
  typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[brand] === true
