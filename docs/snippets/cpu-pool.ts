// A CPU memory pool: one SharedArrayBuffer carved into blocks, a typed error when it is full.
import { OutOfMemoryError, Tensor, createCpuMemoryPool, withAllocator } from "@tensorlane/core"

const pool = createCpuMemoryPool({ capacity: 1 << 20, name: "activations" })
const a = Tensor.zeros([128 * 1024], { allocator: pool }) // 512 KiB, float32
const b = withAllocator(pool, () => Tensor.ones([64 * 1024])) // everything allocated inside comes from the pool
console.log(`pool: ${pool.used} of ${pool.capacity} bytes used, b.sum() = ${b.sum()}`)
try {
  withAllocator(pool, () => Tensor.zeros([128 * 1024]))
} catch (error) {
  if (error instanceof OutOfMemoryError) console.log(`${error._tag}: ${error.message}`)
}
pool.free(a.storage)
console.log(`after freeing a: ${pool.used} bytes used`)
