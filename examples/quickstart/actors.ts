// An actor is defined in a module so that every actor process can import it.
import { defineActor, method, Tensor } from "@tensorlane/core"

export const Worker = defineActor(import.meta.url, "Worker", {
  init: ({ index }) => ({ index }),
  methods: {
    // The tensor stays in this actor; a consumer in the same gloo group receives it straight from here.
    randomTensor: method({ tensorTransport: "gloo" }, (_state) => Tensor.randn([1000, 1000], { seed: 7 })),
    tensorDict: method({ tensorTransport: "gloo" }, (_state) => ({ a: Tensor.ones([10]), b: [Tensor.zeros([3, 4])] })),
    sum: (_state, t: Tensor) => t.sum(),
    describe: (state, value: { a: Tensor; b: Array<Tensor> }) =>
      `actor ${state.index} got a: [${value.a.shape}], b[0]: [${value.b[0].shape}]`,
  },
})
