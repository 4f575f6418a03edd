/**
 * The actor of the symmetric-memory checks: it allocates on a group's symmetric heap, writes
 * values into its copy and reads them back with cudaMemcpy by address (transport-nccl's CUDA
 * allocator copies any storage that names a device address), and frees collectively.
 */
import { Tensor, defineActor } from "@tensorlane/core"
import { type AllocateSymmetricOptions, allocateSymmetric, freeSymmetric, isSymmetric } from "@tensorlane/symmetric-mem"
import { cudaAllocator, ncclStatus } from "@tensorlane/transport-nccl"

export interface RoundTrip {
  readonly device: string
  readonly storageBytes: number
  readonly address: string
  readonly window: string | undefined
  readonly communicator: string | undefined
  readonly symmetricWhileHeld: boolean
  readonly valuesCameBack: boolean
  readonly symmetricAfterFree: boolean
}

export const SymmetricProbe = defineActor(import.meta.url, "SymmetricProbe", {
  init: () => ({}),
  methods: {
    roundTrip: async (_s, shape: ReadonlyArray<number>, options: AllocateSymmetricOptions): Promise<RoundTrip> => {
      const t = await allocateSymmetric(shape, "float32", options)
      const handle = t.storage.handle as { address: bigint; window?: bigint; communicator?: string }
      const symmetricWhileHeld = isSymmetric(t)
      let valuesCameBack: boolean
      try {
        const values = Tensor.randn(shape, { seed: 7 })
        const back = Tensor.zeros(shape)
        const cuda = cudaAllocator(t.device)
        cuda.copy!(values.storage, 0, t.storage, 0, values.nbytes)
        cuda.copy!(t.storage, 0, back.storage, 0, values.nbytes)
        valuesCameBack = back.equal(values)
      } finally {
        await freeSymmetric(t)
      }
      return {
        device: t.device,
        storageBytes: t.storage.byteLength,
        address: `0x${handle.address.toString(16)}`,
        window: handle.window === undefined ? undefined : `0x${handle.window.toString(16)}`,
        communicator: handle.communicator,
        symmetricWhileHeld,
        valuesCameBack,
        symmetricAfterFree: isSymmetric(t),
      }
    },
    /** This process's NCCL communicators, by group. */
    communicators: () => ncclStatus().communicators.map((c) => c.group),
  },
})
