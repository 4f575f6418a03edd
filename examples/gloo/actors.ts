// The actor of Ray Direct Transport's gloo walkthrough, in TypeScript.
import { defineActor, method, Tensor, waitTensorFreed } from "@tensorlane/core"

interface State {
  tensor?: Tensor
}

export const MyActor = defineActor(import.meta.url, "MyActor", {
  init: (): State => ({}),
  methods: {
    randomTensor: method({ tensorTransport: "gloo" }, () => Tensor.randn([1000, 1000])),
    randomTensorDict: method({ tensorTransport: "gloo" }, () => ({ tensor1: Tensor.randn([1000, 1000]), tensor2: Tensor.randn([1000, 1000]) })),
    sum: (_state, t: Tensor) => t.sum(),
    sumDict: (_state, d: { tensor1: Tensor; tensor2: Tensor }) => d.tensor1.sum() + d.tensor2.sum(),
    // Keeps the tensor it returns: the actor and the runtime then share it.
    randomTensorKept: method({ tensorTransport: "gloo" }, (state: State) => {
      state.tensor = Tensor.randn([1000, 1000])
      return state.tensor
    }),
    // In-place update while the runtime may still hold the tensor for a transfer.
    incrementAndSumStoredTensor: (state) => state.tensor!.add_(1).sum(),
    // The fix: wait until every object that uses the tensor is freed, then write in place.
    incrementAndSumStoredTensorSafely: async (state) => {
      await waitTensorFreed(state.tensor!)
      return state.tensor!.add_(1).sum()
    },
    incrementAndSum: (_state, t: Tensor) => t.clone().add_(1).sum(),
    incrementAndSumInPlace: (_state, t: Tensor) => t.add_(1).sum(),
  },
})
