// A trainer actor with one NCCL memory pool (Megatron-Core's nccl_allocator), registered
// with every nccl group the actor is in. Needs a GPU per actor.
import { Tensor, defineActor } from "@tensorlane/core"
import { type NcclMemPool, createNcclMemPool, deregisterMemPool, memPoolWithoutRegistration, multiGroupMemPool } from "@tensorlane/transport-nccl"

interface State {
  pool?: NcclMemPool
  kept: Array<Tensor>
}

/** Segments registered per group, e.g. { dp: 1, ep: 1 }. */
const registrations = (pool: NcclMemPool) => Object.fromEntries([...pool.registrations].map(([name, segments]) => [name, segments.size]))

export const Trainer = defineActor(import.meta.url, "Trainer", {
  init: (): State => ({ kept: [] }),
  methods: {
    createPool: (state: State) => {
      state.pool = createNcclMemPool({ segmentBytes: 1 << 20 }) // windows by default, as Megatron's symmetric=True
      return state.pool.name
    },
    // Allocated inside the scope; leaving it registers the new segments with every group, in one order on every rank.
    gradients: async (state: State, groups: Array<string>) => {
      {
        await using mem = await multiGroupMemPool(state.pool!, groups)
        state.kept.push(mem.run(() => Tensor.zeros([1 << 16], { dtype: "float32", device: "cuda:0" })))
      }
      return registrations(state.pool!)
    },
    // Allocated from the pool without registering: a new segment that no group knows of.
    staging: (state: State) => {
      const mem = memPoolWithoutRegistration(state.pool!)
      state.kept.push(mem.run(() => Tensor.zeros([1 << 19], { dtype: "float32", device: "cuda:0" })))
      return { segments: state.pool!.segments.length, registered: registrations(state.pool!) }
    },
    release: async (state: State, groups: Array<string>) => {
      for (const name of groups) await deregisterMemPool(state.pool!, name)
      state.kept = []
    },
  },
})
