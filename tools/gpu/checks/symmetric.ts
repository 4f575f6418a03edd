/**
 * Symmetric memory on one GPU with one rank (one PE): the nvshmem backend in an shm group, and the
 * nccl-window backend on an nccl group's communicator and on an shm group's own. Every allocation
 * (with makeSymmetric) is device memory that takes values and gives them back, and is freed
 * collectively.
 */
import * as assert from "node:assert/strict"
import type { ActorHandle, Cluster } from "@tensorlane/core"
import type { AllocateSymmetricOptions } from "@tensorlane/symmetric-mem"
import { type RoundTrip, SymmetricProbe } from "../actors.js"
import type { Check, Facts } from "../check.js"
import { WAIT_MS, take, withCluster } from "./cluster.js"

const SHAPE = [1000, 257]

type Probe = ActorHandle<typeof SymmetricProbe>

const withProbe = (transports: ReadonlyArray<string>, body: (cluster: Cluster, probe: Probe) => Promise<void>): Promise<void> =>
  withCluster(transports, async (cluster) => {
    const [probe] = await cluster.spawn(SymmetricProbe)
    await body(cluster, probe)
  })

/** One allocation's round trip in the probe, recorded as `facts[label]` and checked. */
const roundTrip = async (cluster: Cluster, probe: Probe, facts: Facts, label: string, options: AllocateSymmetricOptions): Promise<RoundTrip> => {
  const trip = await take(cluster, probe.roundTrip(SHAPE, { makeSymmetric: true, timeoutMs: WAIT_MS, ...options }))
  facts[label] = trip
  assert.equal(trip.device, "cuda:0", `${label}: on cuda:0`)
  assert.ok(trip.storageBytes >= SHAPE[0] * SHAPE[1] * 4, `${label}: a block of at least the tensor's size`)
  assert.notEqual(BigInt(trip.address), 0n, `${label}: a device address`)
  assert.equal(trip.symmetricWhileHeld, true, `${label}: symmetric while held`)
  assert.equal(trip.valuesCameBack, true, `${label}: the values written came back`)
  assert.equal(trip.symmetricAfterFree, false, `${label}: not symmetric once freed`)
  return trip
}

export const nvshmemOnePe: Check = (facts) =>
  withProbe(["@tensorlane/symmetric-mem"], async (cluster, probe) => {
    await cluster.createCollectiveGroup([probe], { backend: "shm", name: "pe" })
    await roundTrip(cluster, probe, facts, "first", { group: "pe", backend: "nvshmem" })
    await roundTrip(cluster, probe, facts, "again", { group: "pe", backend: "nvshmem" })
  })

export const ncclWindowOneRank: Check = (facts) =>
  withProbe(["@tensorlane/symmetric-mem", "@tensorlane/transport-nccl"], async (cluster, probe) => {
    await cluster.createCollectiveGroup([probe], { backend: "nccl", name: "win" })
    await cluster.createCollectiveGroup([probe], { backend: "shm", name: "heap" })
    for (const [group, backend, communicator] of [
      ["win", undefined, "win"],
      ["heap", "nccl-window", "heap/nccl-window"],
    ] as const) {
      const trip = await roundTrip(cluster, probe, facts, communicator, { group, backend })
      assert.equal(trip.communicator, communicator, `${communicator}: the window's communicator`)
      assert.notEqual(BigInt(trip.window ?? "0"), 0n, `${communicator}: an ncclWindow_t`)
    }
    assert.deepEqual(await take(cluster, probe.communicators()), ["win"], "the heap's own communicator went with its last block")
  })
