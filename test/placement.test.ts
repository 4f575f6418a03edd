/** Placement without a cluster config: one machine as before, and the options of clusters across hosts refused. */
import { ClusterConfigError, InvalidArgumentError, TensorlaneCluster, UnsupportedOperationError, start } from "@tensorlane/core"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"

describe("a cluster without a cluster config", () => {
  it("refuses host and hosts, and hosts(), with typed errors, and starts actors on this machine", async () => {
    await using cluster = await start()
    await expect(cluster.spawn(Helper, { host: "h1" })).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(cluster.spawn(Helper, { hosts: ["h1"] })).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(cluster.hosts()).rejects.toBeInstanceOf(UnsupportedOperationError)
    const [actor] = await cluster.spawn(Helper)
    expect(await cluster.get(actor!.pid())).not.toBe(process.pid)
  })

  it("fails to start with ClusterConfigError for a cluster config that is not there", async () => {
    await expect(start({ cluster: "/nonexistent/cluster.json" })).rejects.toBeInstanceOf(ClusterConfigError)
  })

  it("fails the Effect face's hosts() and a missing config's layer with the same typed errors", async () => {
    const hosts = await Effect.runPromise(Effect.flip(TensorlaneCluster.hosts()).pipe(Effect.provide(TensorlaneCluster.layer())))
    expect(hosts).toBeInstanceOf(UnsupportedOperationError)
    const missing = await Effect.runPromise(Effect.flip(TensorlaneCluster.hosts().pipe(Effect.provide(TensorlaneCluster.layer({ cluster: "/nonexistent/cluster.json" })))))
    expect(missing).toBeInstanceOf(ClusterConfigError)
  })
})
