// A NIXL registered pool: registered once, so objects allocated from it need no registration of their own.
import { Tensor, withAllocator } from "@tensorlane/core"
import { createNixlMemoryPool } from "@tensorlane/transport-nixl"

const pool = createNixlMemoryPool({ capacity: 16 << 20, name: "kv-cache" })
const block = withAllocator(pool, () => Tensor.full([1 << 20], 2, { dtype: "float32" }))
console.log(`registered: ${pool.registered}, ${pool.used} bytes used, sum ${block.sum()}`)
pool.close() // deregisters; objects still using its blocks keep the registration until they are freed
console.log(`after close: registered ${pool.registered}`)
