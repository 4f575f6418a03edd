// What the NCCL examples share: one GPU per actor (NCCL refuses two ranks on one GPU), and a clean
// exit with the typed error on machines that lack GPUs.
import type { SpawnOptions } from "@tensorlane/core"

/** Spawn options that give the actor number `index` the GPU of that number, as Ray's num_gpus=1 does. */
export const ownGpu = (index: number): SpawnOptions => ({ env: { CUDA_VISIBLE_DEVICES: String(index) } })

/** Runs the example; a typed failure (NoCudaDeviceError without a GPU) is printed as `<_tag>: <message>`, exit code 1. */
export const runExample = async (main: () => Promise<void>): Promise<void> => {
  try {
    await main()
  } catch (error) {
    const tag = (error as { _tag?: string })._tag
    if (tag === undefined) throw error
    console.error(`${tag}: ${(error as Error).message}`)
    process.exitCode = 1
  }
}
