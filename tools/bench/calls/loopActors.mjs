/** The actors of loop.mjs: a producer of n bytes of float32 ones, a consumer, and each process's CPU time. */
import { Tensor, defineActor } from "@tensorlane/core"

export const LoopWorker = defineActor(import.meta.url, "LoopWorker", {
  init: () => ({}),
  methods: {
    make: (_state, bytes) => Tensor.full([bytes / 4], 1, { dtype: "float32" }),
    numel: (_state, t) => t.numel,
    /** CPU time of the whole process (its main thread and its transfer agent), in microseconds. */
    cpu: () => {
      const { user, system } = process.cpuUsage()
      return user + system
    },
  },
})
