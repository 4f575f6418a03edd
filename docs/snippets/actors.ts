// The actors the guides' snippets use: a module, so that actor processes can load it.
import { Tensor, defineActor } from "@tensorlane/core"

export const Worker = defineActor(import.meta.url, "Worker", {
  init: () => ({}),
  methods: {
    make: (_state, n: number) => Tensor.full([n], 1, { dtype: "float32" }),
    sum: (_state, t: Tensor) => t.sum(),
    fail: (_state, why: string): Tensor => {
      throw new RangeError(why)
    },
    sleep: async (_state, ms: number) => new Promise((resolve) => setTimeout(() => resolve(ms), ms)),
    pid: () => process.pid,
  },
})
