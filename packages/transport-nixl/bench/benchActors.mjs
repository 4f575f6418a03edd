/** Actors of the actor-to-actor benchmark (DESIGN.md §5's scenario), over nixl. */
import { Tensor, defineActor, method } from "@tensorlane/core"

export const NixlBench = defineActor(import.meta.url, "NixlBench", {
  init: () => ({}),
  methods: {
    make: method({ tensorTransport: "nixl" }, (_s, n) => Tensor.full([n / 4], 1, { dtype: "float32" })),
    numel: (_s, t) => t.numel,
  },
})
