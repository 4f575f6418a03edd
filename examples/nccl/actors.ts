// The actor of Ray Direct Transport's NCCL example, in TypeScript: its tensor is made on
// the GPU and stays there until a consumer receives it over NCCL.
import { defineActor, method, Tensor } from "@tensorlane/core"

export const MyActor = defineActor(import.meta.url, "MyActor", {
  init: () => ({}),
  methods: {
    randomTensor: method({ tensorTransport: "nccl" }, () => Tensor.randn([1000, 1000]).to("cuda:0")),
    // Element ops run on the CPU: the sum copies the received GPU tensor to the host first.
    sum: (_state, t: Tensor) => t.to("cpu").sum(),
  },
})
