/**
 * CUDA device memory through transport-nccl's allocator: tensors of every kind of dtype go host to
 * device and back (cudaMalloc, cudaMemcpy both ways) and device to device, and come back equal to
 * the host original, views at an offset included.
 */
import * as assert from "node:assert/strict"
import { Tensor } from "@tensorlane/core"
import { cudaAllocator, ncclStatus } from "@tensorlane/transport-nccl"
import type { Check } from "../check.js"

const MiB = 2 ** 20

const samples = (): ReadonlyArray<Tensor> => [
  Tensor.randn([16 * MiB / 4], { seed: 1 }),
  Tensor.randn([1000, 257], { dtype: "float64", seed: 2 }),
  Tensor.randn([MiB], { dtype: "bfloat16", seed: 3 }),
  Tensor.randn([MiB + 3], { dtype: "float16", seed: 4 }),
  Tensor.arange(-(2 ** 20), 2 ** 20, 1, { dtype: "int64" }),
  Tensor.arange(0, 255 * 4099, 1, { dtype: "uint8" }),
]

export const cudaTensors: Check = async (facts) => {
  const status = ncclStatus()
  facts.devices = status.devices
  facts.cudart = status.cudart
  assert.ok(status.devices.count > 0, `the CUDA runtime sees no device: ${status.devices.error ?? "no error given"}`)
  const cases: Array<Record<string, unknown>> = []
  facts.cases = cases
  for (const host of samples()) {
    const device = host.to("cuda:0")
    assert.equal(device.device, "cuda:0")
    assert.ok(device.to("cpu").equal(host), `${host.dtype} [${host.shape}] came back from cuda:0 changed`)
    const copy = device.clone()
    assert.ok(copy.to("cpu").equal(host), `${host.dtype} [${host.shape}] cloned on cuda:0 came back changed`)
    cudaAllocator("cuda:0").free(copy.storage)
    cudaAllocator("cuda:0").free(device.storage)
    cases.push({ dtype: host.dtype, shape: [...host.shape], bytes: host.nbytes })
  }
  const rows = Tensor.randn([64, 1000], { seed: 5 })
  const middle = rows.slice(0, 17, 40)
  const onDevice = middle.to("cuda:0")
  assert.ok(onDevice.to("cpu").equal(middle), "rows 17..39 (a view at an offset) came back changed")
  const back = Tensor.zeros([23, 1000])
  cudaAllocator("cuda:0").copy!(onDevice.storage, 0, back.storage, 0, back.nbytes)
  assert.ok(back.equal(middle), "a device-to-host copy into an existing tensor differs")
  cudaAllocator("cuda:0").free(onDevice.storage)
  // Recorded, not asserted: what a copy from a freed device storage does is the allocator's business.
  try {
    onDevice.to("cpu")
    facts.readAfterFree = "copied"
  } catch (error) {
    facts.readAfterFree = `refused: ${(error as { _tag?: string })._tag ?? "untagged"}: ${(error as Error).message}`
  }
}
