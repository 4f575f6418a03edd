/**
 * A reference to the value of a method call or a put. The driver owns every object; a ref held in
 * an actor is a borrowed handle that keeps the object alive until it is released or collected.
 * Object ids repeat from cluster to cluster, so a ref also carries its cluster: another cluster, or
 * its own once shut down, refuses it.
 */
import { ClusterClosedError, InvalidArgumentError, ObjectFreedError, WrongClusterError } from "./Errors.js"
import { describe } from "./internal/arguments.js"

const brand = Symbol.for("tensorlane.ObjectRef")

/** The cluster that made a ref or an actor handle: its random id, and whether it is shut down. */
export interface ClusterIdentity {
  readonly id: string
  readonly closed: boolean
}

/** Who counts the handles of a process: the owner's directory in the driver, a borrow ledger in actors. */
export interface RefTracker {
  readonly acquire: (objectId: string) => void
  readonly release: (objectId: string) => void
  readonly cluster: ClusterIdentity
}

/**
 * Fails unless `cluster` made `holder` (WrongClusterError), and while that cluster is shut down
 * (ClusterClosedError). `what` names the holder in the message.
 */
export const requireSameCluster = (holderCluster: ClusterIdentity, cluster: ClusterIdentity, what: string): void => {
  if (holderCluster.id !== cluster.id) {
    if (holderCluster.closed) throw new ClusterClosedError({ message: `${what} belongs to a cluster that was shut down` })
    throw new WrongClusterError({ message: `${what} belongs to another cluster (${holderCluster.id}), not to this one (${cluster.id})` })
  }
  if (cluster.closed) throw new ClusterClosedError({ message: `${what} belongs to a cluster that was shut down` })
}

/** Fails once the cluster is shut down (ClusterClosedError). */
export const requireOpen = (cluster: ClusterIdentity): void => {
  if (cluster.closed) throw new ClusterClosedError({ message: "the cluster is shut down" })
}

let clusterOf: (ref: ObjectRef<unknown>) => ClusterIdentity

const collected = new FinalizationRegistry<{ tracker: RefTracker; objectId: string }>(({ tracker, objectId }) =>
  tracker.release(objectId),
)

export class ObjectRef<out T = unknown> implements Disposable {
  declare readonly _value: T
  readonly [brand] = true
  #tracker: RefTracker | undefined
  readonly #cluster: ClusterIdentity

  static {
    clusterOf = (ref) => ref.#cluster
  }

  /** @internal refs are created by the runtime (method calls, put, values that carry refs). */
  constructor(
    readonly id: string,
    tracker: RefTracker,
  ) {
    this.#tracker = tracker
    this.#cluster = tracker.cluster
    tracker.acquire(id)
    collected.register(this, { tracker, objectId: id }, this)
  }

  /** The id of the cluster that made this ref. */
  get clusterId(): string {
    return this.#cluster.id
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

/** Fails unless `cluster` made `ref`: another cluster's (WrongClusterError), a shut-down cluster's (ClusterClosedError). */
export const requireRefOf = (ref: ObjectRef<unknown>, cluster: ClusterIdentity): void => {
  if (!isObjectRef(ref)) throw new InvalidArgumentError({ message: `an ObjectRef is needed here, not ${describe(ref)}`, argument: "ref" })
  requireSameCluster(clusterOf(ref), cluster, String(ref))
}

/** As `requireRefOf`, and fails for a ref its holder released (ObjectFreedError, even while other holders keep the object). */
export const requireUsableRef = (ref: ObjectRef<unknown>, cluster: ClusterIdentity): void => {
  requireRefOf(ref, cluster)
  if (ref.released) throw new ObjectFreedError({ message: `${ref} was released by its holder`, objectId: ref.id })
}
