/**
 * NIXL on VRAM, with the trimmed NIXL the bundle carries (bundle.ts says which libraries): a CUDA
 * tensor is registered as VRAM and described for consumers, and Ray Direct Transport's example tensor, made on the GPU
 * by one actor, is READ into the GPU memory of another actor on the same GPU and sums the same.
 */
import * as assert from "node:assert/strict"
import { Tensor } from "@tensorlane/core"
import { currentAllocator } from "@tensorlane/core/plugin"
import { type NixlMetadata, nixl, nixlStatus } from "@tensorlane/transport-nixl"
import { MyActor } from "../../../examples/nccl/actors.js"
import type { Check } from "../check.js"
import { take, withCluster } from "./cluster.js"

export const nixlVram: Check = async (facts) => {
  if (process.env.NIXL_LIB_DIR === undefined) return { skip: "the bundle carries no NIXL (built without NIXL in .tools/libraries)" }
  await import("@tensorlane/transport-nccl")
  const t = Tensor.ones([1 << 20], { allocator: currentAllocator("cuda:0") })
  const metadata = (await nixl.extractMetadata!({ objectId: "vram-check", tensors: [t] })) as NixlMetadata
  facts.nixl = nixlStatus()
  facts.region = { mem: metadata.regions[0].mem, device: metadata.regions[0].device, length: metadata.regions[0].length }
  assert.equal(metadata.regions[0].mem, "vram", "a cuda tensor registers as VRAM")
  await nixl.release!({ objectId: "vram-check", tensors: [t] })
  assert.deepEqual(nixl.inspect!().registrations, [], "released")

  await withCluster(["@tensorlane/transport-nixl", "@tensorlane/transport-nccl"], async (cluster) => {
    const [sender, receiver] = await cluster.spawn(MyActor, { count: 2 })
    const tensor = sender.randomTensor.options({ tensorTransport: "nixl" })()
    const [mine, theirs] = await Promise.all([take(cluster, sender.sum(tensor)), take(cluster, receiver.sum(tensor))])
    tensor.release()
    facts.sums = { sender: mine, receiver: theirs }
    assert.equal(theirs, mine, "the receiver's copy sums as the sender's")
  })
}
