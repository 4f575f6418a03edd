/** The actors of loop.mjs and timeline.mjs: a producer of n bytes of float32 ones, a consumer, and each process's costs and collections. */
import { Tensor, defineActor } from "@tensorlane/core"
import { processUsage, takeCollections } from "./usage.mjs"

export const LoopWorker = defineActor(import.meta.url, "LoopWorker", {
  init: () => ({}),
  methods: {
    make: (_state, bytes) => Tensor.full([bytes / 4], 1, { dtype: "float32" }),
    numel: (_state, t) => t.numel,
    /** This process's costs so far (see usage.mjs). */
    usage: () => processUsage(),
    /** Its full collections since the last look (see usage.mjs). */
    collections: () => takeCollections(),
  },
})
