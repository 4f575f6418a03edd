/**
 * NCCL on one GPU in one process: one-rank communicators (NCCL refuses two ranks of a communicator
 * on one GPU in one process, and one rank is what a single GPU allows here), their in-place
 * collectives, and NCCL memory pools registered with one and with two communicators, as buffers and
 * as windows.
 */
import * as assert from "node:assert/strict"
import { Tensor, withAllocator } from "@tensorlane/core"
import {
  type PoolGroup,
  allocateNcclMemory,
  createNcclMemPool,
  deregisterMemPool,
  deregisterNcclWindow,
  freeNcclMemory,
  multiGroupMemPool,
  nccl,
  ncclMem,
  ncclStatus,
  registerMemPool,
  registerNcclWindow,
} from "@tensorlane/transport-nccl"
import type { Check, Facts } from "../check.js"
import { WAIT_MS } from "./cluster.js"

const MiB = 2 ** 20

/** A one-rank group's member as the pool functions take it: the gather of one rank is its own blob. */
const soloMember = (name: string): PoolGroup => ({ name, rank: 0, worldSize: 1, allGather: async (blob) => [blob] })

/** Runs `body` with one-rank nccl groups of these names, destroyed afterwards whatever happens. */
const withSoloGroups = async (names: ReadonlyArray<string>, body: (members: ReadonlyArray<PoolGroup>) => Promise<void>): Promise<void> => {
  const created: Array<string> = []
  try {
    for (const name of names) {
      await nccl.createGroup!({ name, rank: 0, worldSize: 1, members: ["solo"], timeoutMs: WAIT_MS, allGather: async (blob) => [blob] })
      created.push(name)
    }
    await body(names.map(soloMember))
  } finally {
    for (const name of created.reverse()) await nccl.destroyGroup!(name)
  }
  assert.deepEqual(ncclStatus().communicators, [], "every communicator is destroyed")
}

const communicator = (group: string) => {
  const found = ncclStatus().communicators.find((c) => c.group === group)
  assert.ok(found !== undefined, `no communicator for group "${group}"`)
  return found
}

const signal = () => AbortSignal.timeout(WAIT_MS)

const describeNccl = (facts: Facts) => {
  const status = ncclStatus()
  facts.nccl = { library: status.library, version: status.version, features: status.features, cudart: status.cudart, devices: status.devices }
  return status
}

export const oneRank: Check = async (facts) => {
  describeNccl(facts)
  await withSoloGroups(["solo"], async () => {
    facts.communicator = communicator("solo")
    assert.equal(communicator("solo").ready, true)
    const inputs = [
      Tensor.randn([MiB], { seed: 11 }),
      Tensor.randn([4099], { dtype: "bfloat16", seed: 12 }),
      Tensor.arange(-5000, 5000, 1, { dtype: "int64" }),
      Tensor.randn([16 * MiB], { seed: 13 }),
    ]
    const onDevice = inputs.map((t) => t.to("cuda:0"))
    for (const op of ["sum", "max", "min", "product"] as const) {
      await nccl.allreduce!({ group: "solo", tensors: onDevice, op, signal: signal() })
      onDevice.forEach((t, i) => assert.ok(t.to("cpu").equal(inputs[i]), `allreduce ${op} over one rank changed ${inputs[i].dtype} [${inputs[i].shape}]`))
    }
    await nccl.broadcast!({ group: "solo", tensors: onDevice, root: 0, signal: signal() })
    onDevice.forEach((t, i) => assert.ok(t.to("cpu").equal(inputs[i]), `broadcast over one rank changed ${inputs[i].dtype} [${inputs[i].shape}]`))
    facts.collectives = ["allreduce sum, max, min, product", "broadcast"].join("; ")
    assert.equal(communicator("solo").broken, undefined)
  })
}

/** Values that survive an in-place one-rank allreduce in pool memory: the pool's memory works in collectives. */
const reduceInPool = async (group: string, allocator: Parameters<typeof withAllocator>[0]): Promise<void> => {
  const input = Tensor.randn([MiB / 4], { seed: 21 })
  const t = withAllocator(allocator, () => input.to("cuda:0"))
  assert.equal(t.storage.allocator, allocator, "the tensor lies in the pool")
  await nccl.allreduce!({ group, tensors: [t], op: "sum", signal: signal() })
  assert.ok(t.to("cpu").equal(input), `an allreduce in group "${group}" on pool memory changed it`)
  allocator.free(t.storage)
}

export const pools: Check = async (facts) => {
  const status = describeNccl(facts)
  await withSoloGroups(["pool-a", "pool-b"], async ([a, b]) => {
    const pool = createNcclMemPool({ symmetric: false, segmentBytes: 2 * MiB })
    const first = pool.allocate(MiB)
    await registerMemPool(pool, a)
    assert.equal(communicator("pool-a").registrations, 1, "one segment registered with pool-a")
    {
      const mem = await ncclMem(pool, { group: a })
      mem.run(() => Tensor.zeros([4 * MiB], { dtype: "uint8", device: "cuda:0" }))
      await mem[Symbol.asyncDispose]()
    }
    assert.equal(communicator("pool-a").registrations, 2, "the ncclMem scope registered its new segment with pool-a")
    await registerMemPool(pool, b)
    assert.equal(communicator("pool-b").registrations, 2, "both segments registered with pool-b too")
    {
      const mem = await multiGroupMemPool(pool, [b, a])
      mem.run(() => Tensor.zeros([8 * MiB], { dtype: "uint8", device: "cuda:0" }))
      await mem[Symbol.asyncDispose]()
    }
    facts.buffers = { "pool-a": communicator("pool-a").registrations, "pool-b": communicator("pool-b").registrations, segments: pool.segments.length }
    assert.equal(communicator("pool-a").registrations, 3, "the multi-group scope registered its segment with pool-a")
    assert.equal(communicator("pool-b").registrations, 3, "the multi-group scope registered its segment with pool-b")
    await reduceInPool("pool-a", pool)
    await reduceInPool("pool-b", pool)
    await deregisterMemPool(pool, a)
    await deregisterMemPool(pool, b)
    assert.equal(communicator("pool-a").registrations + communicator("pool-b").registrations, 0, "deregistered from both")
    pool.free(first)

    if (!status.features.windows) {
      facts.windows = `not run: NCCL ${status.version} has no windows`
      return
    }
    const windowed = createNcclMemPool({ symmetric: true, segmentBytes: 2 * MiB })
    const block = windowed.allocate(MiB)
    await registerMemPool(windowed, a)
    await registerMemPool(windowed, b)
    assert.equal(communicator("pool-a").windows, 1, "the symmetric pool's segment is a window of pool-a")
    assert.equal(communicator("pool-b").windows, 1, "and of pool-b")
    await reduceInPool("pool-a", windowed)
    await deregisterMemPool(windowed, a)
    await deregisterMemPool(windowed, b)
    windowed.free(block)
    const storage = allocateNcclMemory("cuda:0", 4 * MiB)
    const window = await registerNcclWindow("pool-a", storage)
    assert.equal(communicator("pool-a").windows, 1, "registerNcclWindow made a window")
    await deregisterNcclWindow(window)
    freeNcclMemory(storage)
    assert.equal(communicator("pool-a").windows + communicator("pool-b").windows, 0, "every window deregistered")
    facts.windows = "symmetric pool with two communicators, registerNcclWindow"
  })
}
