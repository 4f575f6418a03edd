/**
 * Host-to-device and device-to-host bandwidth through tensorlane against cudaMemcpy in the same
 * run: the CUDA allocator's copy into existing memory (tensorlane's cudaMemcpy path), `Tensor.to`
 * (which allocates the destination too), and cuda_memcpy.py's cudaMemcpy through ctypes on the same
 * CUDA runtime, from pageable and from pinned host memory and into a destination allocated per copy
 * (the peer of `Tensor.to`, as is PyTorch's `.to` where python3 has it). The copy path must reach
 * half of cudaMemcpy's pageable bandwidth at the largest size: it is the same call, so less means
 * overhead. `Tensor.to` is reported against the fresh-destination copy and PyTorch, not held to a bar:
 * in a synchronous loop, as here, every host result is fresh memory; `toCpuAwaited` is the same
 * copy with the event loop turning between copies, where the host memory cache recycles results.
 */
import * as assert from "node:assert/strict"
import { execFileSync } from "node:child_process"
import { randomFillSync } from "node:crypto"
import { fileURLToPath } from "node:url"
import { Tensor } from "@tensorlane/core"
import { cudaAllocator, ncclStatus } from "@tensorlane/transport-nccl"
import type { Check } from "../check.js"

const MiB = 2 ** 20
const SIZES = [16 * MiB, 256 * MiB]
const REPS = 7
const BAR = 0.5
const WARM_AWAITED = 16

const REFERENCE = fileURLToPath(new URL("../cuda_memcpy.py", import.meta.url))

type Rates = { readonly h2d: number; readonly d2h: number }

/** GB/s of `bytes` moved in the median of REPS times (ms). */
const medianGbps = (bytes: number, times: Array<number>): number => {
  times.sort((a, b) => a - b)
  return bytes / (times[REPS >> 1] / 1000) / 1e9
}

/** GB/s of the median of REPS timed runs after one warm-up. */
const rate = (bytes: number, run: () => void): number => {
  run()
  const times: Array<number> = []
  for (let i = 0; i < REPS; i++) {
    const start = performance.now()
    run()
    times.push(performance.now() - start)
  }
  return medianGbps(bytes, times)
}

/**
 * Like `rate`, timing `run` alone, with a turn of the event loop between runs (as a program that
 * awaits between copies gives the host memory cache the chance to learn which results are dead) and
 * WARM_AWAITED runs untimed first, while the cache climbs to its allowance.
 */
const rateAwaited = async (bytes: number, run: () => void): Promise<number> => {
  const times: Array<number> = []
  for (let i = 0; i < WARM_AWAITED + REPS; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    const start = performance.now()
    run()
    if (i >= WARM_AWAITED) times.push(performance.now() - start)
  }
  return medianGbps(bytes, times)
}

const round = (rates: Rates): Rates => ({ h2d: Number(rates.h2d.toFixed(2)), d2h: Number(rates.d2h.toFixed(2)) })

export const bandwidth: Check = async (facts) => {
  const { cudart } = ncclStatus()
  const cuda = cudaAllocator("cuda:0")
  const measured: Record<string, { copy: Rates; to: Rates; toCpuAwaited: number }> = {}
  for (const n of SIZES) {
    const host = Tensor.empty([n], { dtype: "uint8" })
    host.storage.bytes.fill(1)
    const device = Tensor.empty([n], { dtype: "uint8", device: "cuda:0" })
    const copy = {
      h2d: rate(n, () => cuda.copy!(host.storage, 0, device.storage, 0, n)),
      d2h: rate(n, () => cuda.copy!(device.storage, 0, host.storage, 0, n)),
    }
    const to = {
      h2d: rate(n, () => cuda.free(host.to("cuda:0").storage)),
      d2h: rate(n, () => void device.to("cpu")),
    }
    const toCpuAwaited = await rateAwaited(n, () => void device.to("cpu"))
    measured[n] = { copy: round(copy), to: round(to), toCpuAwaited: Number(toCpuAwaited.toFixed(2)) }
    const pattern = Tensor.empty([n], { dtype: "uint8" })
    randomFillSync(pattern.storage.bytes)
    cuda.copy!(pattern.storage, 0, device.storage, 0, n)
    cuda.copy!(device.storage, 0, host.storage, 0, n)
    assert.equal(Buffer.compare(host.storage.bytes, pattern.storage.bytes), 0, `${n} random bytes came back from cuda:0 changed`)
    cuda.free(device.storage)
  }
  facts.tensorlane = measured
  const reference = JSON.parse(
    execFileSync("python3", [REFERENCE, cudart, SIZES.join(","), String(REPS)], { encoding: "utf8", timeout: 80_000, stdio: ["ignore", "pipe", "pipe"] }),
  ) as Record<string, { pageable: Rates; pinned: Rates; fresh: Rates; torch: Rates | null }>
  facts.cudaMemcpy = Object.fromEntries(
    Object.entries(reference).map(([n, r]) => [n, { pageable: round(r.pageable), pinned: round(r.pinned), fresh: round(r.fresh) }]),
  )
  facts.torchTo = Object.fromEntries(Object.entries(reference).map(([n, r]) => [n, r.torch === null ? null : round(r.torch)]))
  const largest = SIZES[SIZES.length - 1]
  const ratio = {
    h2d: measured[largest].copy.h2d / reference[largest].pageable.h2d,
    d2h: measured[largest].copy.d2h / reference[largest].pageable.d2h,
  }
  facts.copyVsCudaMemcpy = round(ratio)
  assert.ok(ratio.h2d >= BAR && ratio.d2h >= BAR, `tensorlane's copy reached ${round(ratio).h2d} (h2d) and ${round(ratio).d2h} (d2h) of cudaMemcpy from pageable memory; the bar is ${BAR}`)
}
