// An actor that keeps its weights registered with NIXL and hands out views of them.
import { Tensor, defineActor, method, waitTensorFreed } from "@tensorlane/core"
import { deregisterNixlMemory, nixlRegistrationRefs, registerNixlMemory } from "@tensorlane/transport-nixl"

export const Weights = defineActor(import.meta.url, "Weights", {
  init: () => ({ weights: Tensor.full([1 << 18], 1, { dtype: "float32" }) }),
  methods: {
    // Pinned once: every object made from views of the weights reuses the one registration.
    pin: (state) => {
      registerNixlMemory(state.weights)
      return nixlRegistrationRefs(state.weights)
    },
    unpin: (state) => {
      deregisterNixlMemory(state.weights)
      return nixlRegistrationRefs(state.weights)
    },
    shard: method({ tensorTransport: "nixl" }, (state: { weights: Tensor }, i: number) => state.weights.slice(0, i * 32768, (i + 1) * 32768)),
    // Writes the weights in place only once no object still uses their memory.
    update: async (state, value: number) => {
      await waitTensorFreed(state.weights, { timeoutMs: 10_000 })
      state.weights.fill_(value)
      return state.weights.sum()
    },
  },
})
