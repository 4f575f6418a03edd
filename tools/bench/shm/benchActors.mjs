/** Actors of the shm benchmark (shmTransport.mjs): tensorlane bench's scenario, and the same bytes on a symmetric heap. */
import { Tensor, defineActor, method } from "@tensorlane/core"
import { allocateSymmetric } from "@tensorlane/symmetric-mem"

export const ShmBench = defineActor(import.meta.url, "ShmBench", {
  init: () => ({ onHeap: new Map() }),
  methods: {
    /** The scenario as written: a fresh ordinary tensor, which the shm transport stages on the producer's heap. */
    make: method({ tensorTransport: "shm" }, (_s, n) => Tensor.full([n / 4], 1, { dtype: "float32" })),
    /** The same bytes written into a tensor on the producer's symmetric heap (allocated once per size): described in place, no staging copy. */
    makeOnHeap: method({ tensorTransport: "shm" }, async (s, n, group) => {
      let t = s.onHeap.get(n)
      if (t === undefined) s.onHeap.set(n, (t = await allocateSymmetric([n / 4], "float32", { group })))
      return t.fill_(1)
    }),
    numel: (_s, t) => t.numel,
  },
})
