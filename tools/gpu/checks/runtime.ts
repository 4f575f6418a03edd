/**
 * The bundle itself, no GPU needed: every bundled addon links on this host (its C++ runtime and
 * glibc), and an actor process starts from the bundled Node and packages and runs a call.
 */
import * as assert from "node:assert/strict"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Tensor } from "@tensorlane/core"
import { MyActor } from "../../../examples/nccl/actors.js"
import type { Check } from "../check.js"
import { take, withCluster } from "./cluster.js"

/** The addons the bundle carries, by package (gloo's needs Debian's libgloo, which the device lacks). */
const ADDONS: ReadonlyArray<readonly [string, string]> = [
  ["@tensorlane/transport-nccl", "tensorlane_nccl.node"],
  ["@tensorlane/symmetric-mem", "tensorlane_symmetric.node"],
  ["@tensorlane/transport-nixl", "tensorlane_nixl.node"],
]

export const runtime: Check = async (facts) => {
  facts.node = process.version
  const require = createRequire(import.meta.url)
  const addons: Record<string, number> = {}
  for (const [pkg, file] of ADDONS) {
    const path = join(dirname(fileURLToPath(import.meta.resolve(pkg))), "..", "build", "Release", file)
    addons[file] = Object.keys(require(path) as object).length
  }
  facts.addonExports = addons
  facts.actorSum = await withCluster(["@tensorlane/transport-nccl"], async (cluster) => {
    const [actor] = await cluster.spawn(MyActor)
    return take(cluster, actor.sum(Tensor.arange(100, { dtype: "float32" })))
  })
  assert.equal(facts.actorSum, 4950, "an actor summed 0..99")
}
