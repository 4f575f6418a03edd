/**
 * Two actor processes on one GPU in one nccl group: whether NCCL lets them share it (it refuses
 * two ranks of a communicator on one GPU in one process; across processes it is found out here),
 * and when it does, Ray Direct Transport's NCCL example: a CUDA tensor moves sender -> receiver
 * and sums the same on both. A refusal must be NCCL's own (NcclError) in bounded time, with no group left behind; a
 * timeout or any other error is a failure.
 */
import * as assert from "node:assert/strict"
import type { CollectiveGroup } from "@tensorlane/core"
import { MyActor } from "../../../examples/nccl/actors.js"
import type { Check } from "../check.js"
import { WAIT_MS, take, withCluster } from "./cluster.js"

export const twoProcesses: Check = (facts) =>
  withCluster(["@tensorlane/transport-nccl"], async (cluster) => {
    const [sender, receiver] = await cluster.spawn(MyActor, { count: 2, env: { CUDA_VISIBLE_DEVICES: "0" } })
    let group: CollectiveGroup
    const started = Date.now()
    try {
      group = await cluster.createCollectiveGroup([sender, receiver], { backend: "nccl", name: "pair", timeoutMs: WAIT_MS })
    } catch (error) {
      const tag = (error as { _tag?: string })._tag
      facts.shared = false
      facts.refusal = { tag, message: (error as Error).message, ms: Date.now() - started }
      assert.equal(tag, "NcclError", `the creation ended with ${tag ?? "an untyped error"}, not NCCL's refusal`)
      assert.deepEqual((await cluster.inspect()).groups, [], "no group is left after the refusal")
      return
    }
    facts.shared = true
    const tensor = sender.randomTensor()
    const [mine, theirs] = await Promise.all([take(cluster, sender.sum(tensor)), take(cluster, receiver.sum(tensor))])
    tensor.release()
    facts.sums = { sender: mine, receiver: theirs }
    assert.equal(theirs, mine, "the receiver's copy sums as the sender's")
    await group.destroy()
  })
