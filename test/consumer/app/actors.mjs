// The consumer app's actor, plain JavaScript as a user without a TypeScript loader writes it.
import { defineActor, Tensor } from "@tensorlane/core"

export const SHAPE = [1000, 1000]
export const SEED = 7

export const Worker = defineActor(import.meta.url, "Worker", {
  init: ({ index }) => ({ index }),
  methods: {
    randomTensor: () => Tensor.randn(SHAPE, { seed: SEED }),
    sum: (_state, t) => t.sum(),
  },
})
