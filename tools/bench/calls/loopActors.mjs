/** The actors of loop.mjs, timeline.mjs and many.mjs: a producer of float32 ones (one tensor, or a dict of many), a consumer, and each process's costs and collections. */
import { Tensor, defineActor } from "@tensorlane/core"
import { processUsage, takeCollections } from "./usage.mjs"

export const LoopWorker = defineActor(import.meta.url, "LoopWorker", {
  init: () => ({}),
  methods: {
    make: (_state, bytes) => Tensor.full([bytes / 4], 1, { dtype: "float32" }),
    numel: (_state, t) => t.numel,
    /** A dict of `count` tensors of `bytes` each, as a model's state dict is (many.mjs). */
    makeMany: (_state, count, bytes) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`w${i}`, Tensor.full([bytes / 4], 1, { dtype: "float32" })])),
    numelAll: (_state, tensors) => Object.values(tensors).reduce((n, t) => n + t.numel, 0),
    /** This process's costs so far (see usage.mjs). */
    usage: () => processUsage(),
    /** Its full collections since the last look (see usage.mjs). */
    collections: () => takeCollections(),
  },
})
