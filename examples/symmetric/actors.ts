// The actor of the symmetric-memory examples (nvmath-python's symmetric memory helpers): each
// method is run by every rank of an shm group at once, as nvmath-python's examples are run by every
// MPI process.
import { type DType, Tensor, defineActor, group, method, waitTensorFreed } from "@tensorlane/core"
import { allocateSymmetric, freeSymmetric, peerTensor } from "@tensorlane/symmetric-mem"

interface State {
  a?: Tensor
  b?: Tensor
}

const describe = (t: Tensor) => `${t.dtype} [${t.shape.join(", ")}]`

export const Rank = defineActor(import.meta.url, "Rank", {
  init: (): State => ({}),
  methods: {
    // Seed: a = allocate_symmetric_memory((3,3), cupy, dtype=float32); b = ...((3,3), torch, dtype=float64); free_symmetric_memory(a, b)
    allocateAndFree: async (_state, name: string) => {
      const a = await allocateSymmetric([3, 3], "float32", { group: name })
      const b = await allocateSymmetric([3, 3], "float64", { group: name })
      a.fill_(group(name).rank)
      b.fill_(0.5)
      const seen = `rank ${group(name).rank}: a ${describe(a)} sum ${a.sum()}, b ${describe(b)} sum ${b.sum()}`
      await freeSymmetric(a, b)
      return seen
    },
    // Seed: rank 0 asks for (3,3), the others for (2,3), with make_symmetric=True.
    makeSymmetric: async (_state, name: string, makeSymmetric: boolean) => {
      const rank = group(name).rank
      try {
        const a = await allocateSymmetric(rank === 0 ? [3, 3] : [2, 3], "float32", { group: name, makeSymmetric })
        const seen = `rank ${rank}: ${describe(a)}, ${a.nbytes} bytes visible`
        await freeSymmetric(a)
        return seen
      } catch (error) {
        return `rank ${rank}: ${(error as { _tag?: string })._tag}: ${(error as Error).message}`
      }
    },
    // One-sided: every rank writes its rank into its right neighbour's copy, then reads its own.
    ring: async (state: State, name: string) => {
      const { rank, worldSize } = group(name)
      state.a = await allocateSymmetric([4], "int32", { group: name })
      peerTensor(state.a, (rank + 1) % worldSize).fill_(rank)
      return rank
    },
    readRing: async (state: State, name: string) => {
      const seen = `rank ${group(name).rank} holds ${JSON.stringify(state.a!.toArray())}`
      await freeSymmetric(state.a!)
      state.a = undefined
      return seen
    },
    // A symmetric tensor is an ordinary tensor: returned over the shm transport, read by another process without a socket.
    keepOnHeap: async (state: State, name: string, dtype: DType) => {
      state.b = await allocateSymmetric([1000], dtype, { group: name })
      state.b.fill_(group(name).rank + 1)
    },
    heapTensor: method({ tensorTransport: "shm" }, (state: State) => state.b!),
    freeHeap: async (state: State) => {
      // The shm transport exported it in place: freeSymmetric refuses until that object is released here.
      await waitTensorFreed(state.b!)
      await freeSymmetric(state.b!)
      state.b = undefined
    },
    sum: (_state, t: Tensor) => t.sum(),
  },
})
