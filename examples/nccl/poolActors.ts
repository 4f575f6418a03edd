// The actors of Megatron-Core's MultiGroupMemPoolAllocator example, in TypeScript: one
// NCCL memory pool per actor, registered with every nccl group the actor is in.
import { defineActor, group, Tensor } from "@tensorlane/core"
import { createNcclMemPool, deregisterMemPool, multiGroupMemPool, type NcclMemPool } from "@tensorlane/transport-nccl"

interface State {
  pool?: NcclMemPool
  kept: Array<Tensor>
}

export const Trainer = defineActor(import.meta.url, "Trainer", {
  init: (): State => ({ kept: [] }),
  methods: {
    // nccl_allocator.init(); pool = nccl_allocator.create_nccl_mem_pool()
    createPool: (state: State) => {
      state.pool = createNcclMemPool()
      return state.pool.name
    },
    // with MultiGroupMemPoolAllocator(pool, [group_1, group_2]):
    //     a = torch.zeros(1024, ...); b = torch.zeros(1024, ...)
    allocate: async (state: State, groups: Array<string>) => {
      await using mem = await multiGroupMemPool(state.pool!, groups.map((name) => group(name)))
      mem.run(() => state.kept.push(Tensor.zeros([1024], { dtype: "float32", device: "cuda:0" }), Tensor.zeros([1024], { dtype: "float32", device: "cuda:0" })))
      return { segments: state.pool!.segments.length, used: state.pool!.used }
    },
    // Which groups the pool is registered with, and how many segments each.
    registrations: (state: State) => Object.fromEntries([...state.pool!.registrations].map(([g, r]) => [g, r.size])),
    release: async (state: State, groups: Array<string>) => {
      for (const name of groups) await deregisterMemPool(state.pool!, group(name))
      state.kept = []
    },
  },
})
