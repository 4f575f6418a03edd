/**
 * Real transfers between actors on two GPUs (skipped with fewer: NCCL refuses two ranks on one
 * GPU), and the NCCL examples. Run with `npm run test:gpu -w @tensorlane/transport-nccl`.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { type ActorHandle, type Cluster, type CollectiveGroup, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MyActor } from "../examples/nccl/actors.ts"
import { ownGpu } from "../examples/nccl/gpus.ts"
import { bytesMoved, expectClean } from "./helpers.ts"

const gpus = fs.readdirSync("/dev").filter((name) => /^nvidia\d+$/.test(name)).length
const root = fileURLToPath(new URL("..", import.meta.url))
const runExample = (file: string) =>
  promisify(execFile)(process.execPath, ["--import", "tsx", `examples/nccl/${file}`], { cwd: root, timeout: 120_000 })

describe.skipIf(gpus < 2)("transfers between two GPUs", () => {
  let cluster: Cluster
  let sender: ActorHandle<typeof MyActor>
  let receiver: ActorHandle<typeof MyActor>
  let group: CollectiveGroup
  beforeAll(async () => {
    cluster = await start({ transports: ["@tensorlane/transport-nccl"] })
    ;[sender] = await cluster.spawn(MyActor, ownGpu(0))
    ;[receiver] = await cluster.spawn(MyActor, ownGpu(1))
    group = await cluster.createCollectiveGroup([sender, receiver], { backend: "nccl" })
  }, 120_000)
  afterAll(async () => {
    await group?.destroy()
    await cluster?.shutdown()
  })

  it("a CUDA tensor moves sender -> receiver over NCCL and sums the same on both", async () => {
    const before = await bytesMoved("nccl")
    const tensor = sender.randomTensor()
    const [mine, theirs] = await Promise.all([cluster.get(sender.sum(tensor)), cluster.get(receiver.sum(tensor))])
    expect(theirs).toBeCloseTo(mine, 3)
    expect((await bytesMoved("nccl")) - before).toBe(4_000_000)
    tensor.release()
    await expectClean(cluster)
  })

  it("get with useObjectStore copies a CUDA tensor to the driver", async () => {
    const tensor = sender.randomTensor()
    const copy = await cluster.get(tensor, { useObjectStore: true })
    expect(copy.device).toBe("cpu")
    expect(copy.shape).toEqual([1000, 1000])
    tensor.release()
  })
})

describe.skipIf(gpus < 2)("seed 001's NCCL example", () => {
  it("random-tensor-sum.ts prints the sum", async () => {
    expect((await runExample("random-tensor-sum.ts")).stdout).toMatch(/^sum: -?\d+\.\d{3}$/m)
  })
})

describe.skipIf(gpus < 3)("seed 003's Megatron pool example", () => {
  it("megatron-pool.ts registers trainer 0 with both groups", async () => {
    expect((await runExample("megatron-pool.ts")).stdout).toMatch(/^trainer 0 registered with: \{"dp":1,"ep":1\}$/m)
  })
})
