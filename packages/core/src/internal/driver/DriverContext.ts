/** What every module of the driver shares. */
import type { TransferStat } from "../../Metrics.js"
import type { ClusterIdentity, RefTracker } from "../../ObjectRef.js"
import type { ObjectDirectory } from "../objectDirectory.js"
import type { ProcessRuntime } from "../processRuntime.js"

export interface DriverContext {
  /** The cluster's random id, carried by its refs and handles, and whether it is shut down. */
  readonly identity: ClusterIdentity
  /** The limit of one transfer. */
  readonly transferTimeoutMs: number
  readonly directory: ObjectDirectory
  /** Counts the driver's own handles in the directory. */
  readonly tracker: RefTracker
  /** The driver process's own runtime: its transports, its store and its agent. */
  readonly runtime: ProcessRuntime
  /** Records a transfer of the cluster (metrics and span). */
  readonly recordTransfer: (stat: TransferStat) => void
}
