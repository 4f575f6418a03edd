import { constants } from "node:buffer"
import { Worker } from "node:worker_threads"
import { describe, expect, it } from "vitest"
import type { Allocator, Storage } from "../src/Allocator.js"
import { currentAllocator, nextStorageId, registerDeviceAllocator, withAllocator } from "../src/AllocatorScope.js"
import { cpuAllocator, createCpuMemoryPool } from "../src/CpuMemory.js"
import { deviceIndex, isCuda, parseDevice, type Device } from "../src/Device.js"
import {
  DeviceError,
  ObjectFreedError,
  OutOfMemoryError,
  ShapeError,
  UnsupportedOperationError,
} from "../src/Errors.js"
import { Tensor } from "../src/Tensor.js"
import { thrown } from "./helpers/errors.ts"
import { exposedGc as gc } from "./helpers/gc.ts"

describe("Device", () => {
  it("parses canonical device strings", () => {
    expect(parseDevice("cpu")).toBe("cpu")
    expect(parseDevice("cuda:0")).toBe("cuda:0")
    expect(parseDevice("cuda:12")).toBe("cuda:12")
    for (const bad of ["cuda", "cuda:", "cuda:-1", "cuda:01", "cuda:1.5", "CPU", "gpu:0", " cpu", "cuda:99999999999999999", "", 0, null]) {
      const e = thrown(() => parseDevice(bad))
      expect(e).toBeInstanceOf(DeviceError)
      expect((e as DeviceError).message).toContain("cuda:<index>")
    }
  })

  it("isCuda and deviceIndex", () => {
    expect(isCuda("cpu")).toBe(false)
    expect(isCuda("cuda:3")).toBe(true)
    expect(deviceIndex("cuda:3")).toBe(3)
    expect(deviceIndex("cpu")).toBe(-1)
  })
})

describe("cpuAllocator", () => {
  it("allocates zeroed SharedArrayBuffer-backed storage with unique ids", () => {
    const a = cpuAllocator.allocate(16)
    const b = cpuAllocator.allocate(16)
    expect(a.bytes.buffer).toBeInstanceOf(SharedArrayBuffer)
    expect(a.byteLength).toBe(16)
    expect(a.bytes.byteLength).toBe(16)
    expect([...a.bytes]).toEqual(new Array(16).fill(0))
    expect(a.device).toBe("cpu")
    expect(a.handle).toBeUndefined()
    expect(a.allocator).toBe(cpuAllocator)
    expect(a.id).not.toBe(b.id)
    expect(nextStorageId()).toBeGreaterThan(b.id)
  })

  it("allocates zero-length storage", () => {
    const s = cpuAllocator.allocate(0)
    expect(s.byteLength).toBe(0)
    expect(s.bytes.byteLength).toBe(0)
  })

  it("rejects invalid lengths", () => {
    for (const n of [-1, 1.5, NaN, Infinity, 2 ** 60]) expect(() => cpuAllocator.allocate(n)).toThrow(ShapeError)
  })

  // Node 20 views at most 4 GiB in one typed array (Node 22 and later far more).
  it.skipIf(constants.MAX_LENGTH >= 2 ** 53 - 1)("past what one typed array views on this Node, an OutOfMemoryError naming the Node, for a storage and a pool", () => {
    const past = constants.MAX_LENGTH + 16
    for (const refused of [thrown(() => Tensor.empty([past / 4])), thrown(() => createCpuMemoryPool({ capacity: past }))]) {
      expect(refused).toBeInstanceOf(OutOfMemoryError)
      expect(refused).toMatchObject({ requested: past, capacity: constants.MAX_LENGTH, message: expect.stringContaining(`this Node (${process.version}) views at most`) })
    }
  })

  it("free is idempotent and keeps the bytes usable", () => {
    const s = cpuAllocator.allocate(4)
    cpuAllocator.free(s)
    cpuAllocator.free(s)
    s.bytes[0] = 7
    expect(s.bytes[0]).toBe(7)
  })

  it("refuses to free storage of another allocator", () => {
    const pool = createCpuMemoryPool({ capacity: 64 })
    expect(() => cpuAllocator.free(pool.allocate(8))).toThrow(UnsupportedOperationError)
    expect(() => pool.free(cpuAllocator.allocate(8))).toThrow(UnsupportedOperationError)
  })

  it("storage is shared with worker threads", async () => {
    const s = cpuAllocator.allocate(8)
    s.bytes[0] = 41
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads")
       const bytes = new Uint8Array(workerData)
       bytes[1] = bytes[0] + 1
       parentPort.postMessage("done")`,
      { eval: true, workerData: s.bytes.buffer },
    )
    await new Promise<void>((resolve, reject) => {
      worker.once("message", () => resolve())
      worker.once("error", reject)
    })
    await worker.terminate()
    expect(s.bytes[1]).toBe(42)
  })
})

describe("createCpuMemoryPool", () => {
  it("hands out aligned blocks from one SharedArrayBuffer and accounts for them", () => {
    const pool = createCpuMemoryPool({ capacity: 1024, name: "p" })
    expect(pool.name).toBe("p")
    expect(pool.device).toBe("cpu")
    expect(pool.capacity).toBe(1024)
    const a = pool.allocate(10)
    const b = pool.allocate(100)
    expect(a.bytes.buffer).toBeInstanceOf(SharedArrayBuffer)
    expect(a.bytes.buffer).toBe(b.bytes.buffer)
    expect(a.byteLength).toBe(10)
    expect(a.bytes.byteOffset).toBe(0)
    expect(b.bytes.byteOffset).toBe(64)
    expect(b.bytes.byteOffset % 64).toBe(0)
    expect(pool.used).toBe(64 + 128)
    expect(pool.freeBytes).toBe(1024 - 192)
    expect(a.allocator).toBe(pool)
  })

  it("honours a custom alignment and rejects bad ones", () => {
    const pool = createCpuMemoryPool({ capacity: 64, alignment: 8 })
    pool.allocate(1)
    expect(pool.allocate(1).bytes.byteOffset).toBe(8)
    for (const alignment of [0, 4, 12, 7.5, -8]) {
      expect(() => createCpuMemoryPool({ capacity: 64, alignment })).toThrow(ShapeError)
    }
    expect(() => createCpuMemoryPool({ capacity: -1 })).toThrow(ShapeError)
  })

  it("fails with an OutOfMemoryError naming the pool and its capacity", () => {
    const pool = createCpuMemoryPool({ capacity: 256, name: "activations" })
    pool.allocate(200)
    const e = thrown(() => pool.allocate(100))
    expect(e).toBeInstanceOf(OutOfMemoryError)
    const oom = e as OutOfMemoryError
    expect(oom._tag).toBe("OutOfMemoryError")
    expect(oom.requested).toBe(100)
    expect(oom.capacity).toBe(256)
    expect(oom.message).toContain('"activations"')
    expect(oom.message).toContain("256")
    expect(() => createCpuMemoryPool({ capacity: 10 }).allocate(11)).toThrow(OutOfMemoryError)
  })

  it("reuses a freed block", () => {
    const pool = createCpuMemoryPool({ capacity: 128 })
    const a = pool.allocate(128)
    expect(pool.freeBytes).toBe(0)
    pool.free(a)
    pool.free(a)
    expect(pool.used).toBe(0)
    const b = pool.allocate(100)
    expect(b.bytes.byteOffset).toBe(0)
    expect(b.id).not.toBe(a.id)
  })

  it("coalesces neighbouring free blocks in any order", () => {
    const pool = createCpuMemoryPool({ capacity: 64 * 4 })
    const blocks = [pool.allocate(64), pool.allocate(64), pool.allocate(64), pool.allocate(64)]
    pool.free(blocks[1])
    pool.free(blocks[2])
    expect(() => pool.allocate(192)).toThrow(OutOfMemoryError)
    const middle = pool.allocate(128) // fits only if blocks 1 and 2 merged
    expect(middle.bytes.byteOffset).toBe(64)
    pool.free(middle)
    pool.free(blocks[3])
    pool.free(blocks[0])
    expect(pool.used).toBe(0)
    expect(pool.allocate(256).bytes.byteOffset).toBe(0)
  })

  it("uses first fit", () => {
    const pool = createCpuMemoryPool({ capacity: 64 * 6 })
    const [a, , c] = [pool.allocate(64), pool.allocate(64), pool.allocate(128), pool.allocate(64)]
    pool.free(c)
    pool.free(a)
    expect(pool.allocate(64).bytes.byteOffset).toBe(0)
    expect(pool.allocate(64).bytes.byteOffset).toBe(128)
  })

  it("serves an exact fit when the capacity is not a multiple of the alignment", () => {
    const pool = createCpuMemoryPool({ capacity: 100 })
    const a = pool.allocate(100)
    expect(a.byteLength).toBe(100)
    expect(pool.freeBytes).toBe(0)
    pool.free(a)
    pool.allocate(40)
    expect(pool.allocate(36).bytes.byteOffset).toBe(64)
  })

  it("allocates zero-length storage without using a block", () => {
    const pool = createCpuMemoryPool({ capacity: 0 })
    const s = pool.allocate(0)
    expect(s.byteLength).toBe(0)
    expect(pool.used).toBe(0)
    pool.free(s)
  })

  it("makes the bytes of a freed block unreachable", () => {
    const pool = createCpuMemoryPool({ capacity: 64, name: "p" })
    const s = pool.allocate(8)
    pool.free(s)
    const e = thrown(() => s.bytes)
    expect(e).toBeInstanceOf(ObjectFreedError)
    expect((e as ObjectFreedError).objectId).toBe(`storage:${s.id}`)
  })

  it("returns the block of a garbage-collected Storage", async () => {
    const pool = createCpuMemoryPool({ capacity: 1024 })
    const leak = (): void => {
      pool.allocate(1024)
    }
    leak()
    expect(pool.used).toBe(1024)
    for (let attempt = 0; attempt < 50 && pool.used > 0; attempt++) {
      gc()
      await new Promise((r) => setTimeout(r, 10))
    }
    expect(pool.used).toBe(0)
    expect(pool.allocate(1024).bytes.byteOffset).toBe(0)
  })

  it("a loop that never yields: a full pool says its blocks wait for the loop to yield, and each fix it names works", async () => {
    const bytes = 1 << 16
    const pool = createCpuMemoryPool({ capacity: 8 * bytes, name: "loop" })
    const iterations = 64
    const sync = (free: boolean): number => {
      let done = 0
      withAllocator(pool, () => {
        for (; done < iterations; done++) {
          const t = Tensor.ones([bytes / 4])
          if (free) pool.free(t.storage)
        }
      })
      return done
    }
    await new Promise((r) => setImmediate(r))
    const e = thrown(() => sync(false)) as OutOfMemoryError
    expect(e).toBeInstanceOf(OutOfMemoryError)
    expect(e.message).toContain("8 of its blocks (524288 bytes) were allocated since the program last yielded to the event loop")
    expect(e.message).toContain("pool.free(tensor.storage)")
    await new Promise((r) => setImmediate(r))
    expect(sync(true)).toBe(iterations)
    let done = 0
    for (; done < iterations; done++) {
      withAllocator(pool, () => Tensor.ones([bytes / 4]))
      await new Promise((r) => setImmediate(r))
    }
    expect(done).toBe(iterations)
  })
})

describe("withAllocator", () => {
  it("scopes synchronous code and returns its value", () => {
    const pool = createCpuMemoryPool({ capacity: 1024 })
    const t = withAllocator(pool, () => {
      expect(currentAllocator("cpu")).toBe(pool)
      return Tensor.zeros([4])
    })
    expect(t.storage.allocator).toBe(pool)
    expect(currentAllocator("cpu")).toBe(cpuAllocator)
    expect(Tensor.zeros([4]).storage.allocator).toBe(cpuAllocator)
  })

  it("scopes asynchronous code across awaits, and concurrent scopes stay apart", async () => {
    const p1 = createCpuMemoryPool({ capacity: 1024, name: "one" })
    const p2 = createCpuMemoryPool({ capacity: 1024, name: "two" })
    const run = (pool: Allocator) =>
      withAllocator(pool, async () => {
        await new Promise((r) => setTimeout(r, 5))
        const a = Tensor.ones([2])
        await Promise.resolve()
        const b = await new Promise<Tensor>((r) => setImmediate(() => r(Tensor.arange(3))))
        return [a.storage.allocator.name, b.storage.allocator.name]
      })
    const [r1, r2] = await Promise.all([run(p1), run(p2)])
    expect(r1).toEqual(["one", "one"])
    expect(r2).toEqual(["two", "two"])
    expect(currentAllocator("cpu")).toBe(cpuAllocator)
  })

  it("nests, the innermost scope of a device winning", () => {
    const outer = createCpuMemoryPool({ capacity: 64, name: "outer" })
    const inner = createCpuMemoryPool({ capacity: 64, name: "inner" })
    withAllocator(outer, () => {
      withAllocator(inner, () => expect(currentAllocator("cpu")).toBe(inner))
      expect(currentAllocator("cpu")).toBe(outer)
    })
  })

  it("an explicit allocator option beats the scope", () => {
    const scoped = createCpuMemoryPool({ capacity: 64 })
    const explicit = createCpuMemoryPool({ capacity: 64 })
    const t = withAllocator(scoped, () => Tensor.zeros([2], { allocator: explicit }))
    expect(t.storage.allocator).toBe(explicit)
  })
})

describe("device allocators", () => {
  it("asking for CUDA memory without a registered allocator points at @tensorlane/transport-nccl", () => {
    const e = thrown(() => currentAllocator("cuda:0"))
    expect(e).toBeInstanceOf(DeviceError)
    expect((e as DeviceError).device).toBe("cuda:0")
    expect((e as DeviceError).message).toContain("@tensorlane/transport-nccl")
    expect(() => Tensor.zeros([2], { device: "cuda:0" })).toThrow(DeviceError)
  })

  it("rejects invalid devices", () => {
    expect(() => currentAllocator("tpu:0" as Device)).toThrow(DeviceError)
  })

  it("uses a registered factory, once per device, and scopes device allocators independently of cpu", () => {
    const made: Array<Device> = []
    const fake = (device: Device): Allocator => {
      made.push(device)
      return {
        name: `fake-${device}`,
        device,
        allocate: (byteLength): Storage => ({
          id: nextStorageId(),
          device,
          byteLength,
          handle: { fake: true },
          allocator: currentAllocator(device),
          get bytes(): Uint8Array {
            throw new DeviceError({ message: "device memory", device })
          },
        }),
        free: () => undefined,
      }
    }
    registerDeviceAllocator("cuda", fake)
    const a = currentAllocator("cuda:1")
    expect(a.name).toBe("fake-cuda:1")
    expect(currentAllocator("cuda:1")).toBe(a)
    expect(currentAllocator("cuda:2").name).toBe("fake-cuda:2")
    expect(made).toEqual(["cuda:1", "cuda:2"])
    const pool = createCpuMemoryPool({ capacity: 64 })
    withAllocator(pool, () => expect(currentAllocator("cuda:1")).toBe(a))
    registerDeviceAllocator("cuda", fake)
    expect(currentAllocator("cuda:1")).not.toBe(a)
    expect(() => registerDeviceAllocator("tpu" as "cuda", fake)).toThrow(DeviceError)
  })
})

describe("pool region", () => {
  it("is the whole pool memory, every block a view of it", () => {
    const pool = createCpuMemoryPool({ capacity: 4096, name: "region" })
    const block = pool.allocate(100)
    expect(pool.region?.byteLength).toBe(4096)
    expect(block.bytes.buffer).toBe(pool.region?.buffer)
    block.bytes[0] = 7
    expect(pool.region?.[block.bytes.byteOffset]).toBe(7)
    pool.free(block)
  })
})
