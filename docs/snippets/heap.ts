// An actor whose methods every rank of an shm group calls together: symmetric allocation and free are collective.
import { Tensor, defineActor, group } from "@tensorlane/core"
import { allocateSymmetric, freeSymmetric, peerTensor } from "@tensorlane/symmetric-mem"

export const HeapRank = defineActor(import.meta.url, "HeapRank", {
  init: (): { x?: Tensor } => ({}),
  methods: {
    // Each rank asks for its own shape; makeSymmetric gives every rank a block of the largest size.
    allocate: async (state, name: string) => {
      state.x = await allocateSymmetric([group(name).rank + 1, 4], "float32", { group: name, makeSymmetric: true })
      state.x.fill_(0)
      return state.x.shape
    },
    // One-sided: writes into the right neighbour's copy, in place (no message to the neighbour).
    writeRight: (state, name: string) => {
      const { rank, worldSize } = group(name)
      peerTensor(state.x!, (rank + 1) % worldSize).fill_(rank + 1)
    },
    sum: (state) => state.x!.sum(),
    free: async (state) => {
      await freeSymmetric(state.x!)
      state.x = undefined
    },
  },
})
