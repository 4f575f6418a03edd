/** What the checks that start actors share: a cluster with bounded waits, shut down whatever happens. */
import { type Cluster, type ObjectRef, start } from "@tensorlane/core"

/** Every transfer, group creation and get of a check's cluster gives up after this long. */
export const WAIT_MS = 30_000

export const withCluster = async <A>(transports: ReadonlyArray<string>, body: (cluster: Cluster) => Promise<A>): Promise<A> => {
  const cluster = await start({ transports, transferTimeoutMs: WAIT_MS })
  try {
    return await body(cluster)
  } finally {
    await cluster.shutdown()
  }
}

/** The value of a ref made for this (a call's result), then released. */
export const take = <T>(cluster: Cluster, ref: ObjectRef<T>): Promise<T> =>
  (cluster.get(ref, { timeoutMs: WAIT_MS }) as Promise<T>).finally(() => ref.release())
