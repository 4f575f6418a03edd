/**
 * The actors of the benchmark's scenario: the producer returns n bytes of float32 ones, the consumer
 * their count. The transport is chosen per call with .options({ tensorTransport }). Actor processes
 * import this module (dist/internal/BenchActors.js) by its URL.
 */
import { defineActor, Tensor } from "@tensorlane/core"

export const Producer = defineActor(import.meta.url, "Producer", {
  init: () => ({}),
  methods: {
    make: (_state, n: number) => Tensor.full([n / 4], 1, { dtype: "float32" }),
  },
})

export const Consumer = defineActor(import.meta.url, "Consumer", {
  init: () => ({}),
  methods: {
    numel: (_state, t: Tensor) => t.numel,
  },
})
