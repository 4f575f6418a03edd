/**
 * The block small tensors travel in (internal/packing.ts): which tensors go in, where each lies, and
 * a peer's description of it checked before anything is allocated.
 */
import { describe, expect, it } from "vitest"
import { cpuAllocator, createCpuMemoryPool } from "../src/CpuMemory.js"
import { Tensor } from "../src/Tensor.js"
import { withAllocator } from "../src/AllocatorScope.js"
import { PACK_BELOW_BYTES, PACK_BLOCK_BYTES, packTensors, packable, packedIndices, packedMask, packingOf, travelMetas, unpackTensors } from "../src/internal/packing.js"
import { tensorMeta } from "../src/internal/tensorMeta.js"
import { thrown } from "./helpers/errors.ts"
import { countedGc } from "./helpers/gc.ts"

const collections = countedGc()

describe("packable", () => {
  it("takes the tensors whose storage, in default host memory, is below the limit, two or more of them", () => {
    using pool = createCpuMemoryPool({ capacity: 1 << 16 })
    const pooled = withAllocator(pool, () => Tensor.zeros([4]))
    const [small, large] = [Tensor.zeros([4]), Tensor.zeros([PACK_BELOW_BYTES / 4])]
    expect(packable([small, large, Tensor.zeros([PACK_BELOW_BYTES / 4 - 1]), pooled, small, large.slice(0, 0, 4)])).toEqual([0, 2, 4])
    expect(packable([small, large, pooled, large.slice(0, 0, 1)])).toBeUndefined()
    expect(packable([])).toBeUndefined()
  })

  it("leaves out a view spanning more than its storage (a zero stride), and the storages the transport holds registered", () => {
    const small = Tensor.zeros([4])
    const broadcast = Tensor.fromStorage(Tensor.zeros([1]).storage, { dtype: "float32", shape: [PACK_BELOW_BYTES], strides: [0] })
    expect(packable([small, broadcast, small])).toEqual([0, 2])
    const pinned = Tensor.zeros([4])
    expect(packable([small, pinned, small], (storage) => storage === pinned.storage)).toEqual([0, 2])
    expect(packable([small, pinned], (storage) => storage === pinned.storage)).toBeUndefined()
  })
})

describe("packingOf", () => {
  const metas = [Tensor.zeros([3], { dtype: "int8" }), Tensor.zeros([5], { dtype: "float64" }), Tensor.zeros([2, 0]), Tensor.zeros([100])].map(tensorMeta)

  it("places each packed tensor at a multiple of 64 bytes, in the value's order", () => {
    expect(packingOf(metas, [0, 1, 2, 3])).toEqual({ indices: [0, 1, 2, 3], blocks: [0, 0, 0, 0], offsets: [0, 64, 128, 128], blockBytes: [528] })
    expect(packingOf(metas, [1, 3])).toEqual({ indices: [1, 3], blocks: [0, 0], offsets: [0, 64], blockBytes: [464] })
    expect(travelMetas(metas, packingOf(metas, [1, 3]))).toEqual([{ dtype: "uint8", shape: [464], device: "cpu", nbytes: 464 }, metas[0], metas[2]])
  })

  it("starts a new block where one would pass PACK_BLOCK_BYTES", () => {
    const many = Array.from({ length: 70 }, () => ({ dtype: "uint8", shape: [1_000_000], device: "cpu", nbytes: 1_000_000 }))
    const packing = packingOf(many, many.map((_, i) => i))
    const fit = Math.floor(PACK_BLOCK_BYTES / 1_000_000)
    expect(packing.blockBytes).toEqual([fit * 1_000_000, (70 - fit) * 1_000_000])
    expect(packing.blocks).toEqual(many.map((_, i) => (i < fit ? 0 : 1)))
    expect(packing.offsets[fit]).toBe(0)
    expect(travelMetas(many, packing).map((m) => m.nbytes)).toEqual(packing.blockBytes)
  })

  it("reads a peer's mask of packed tensors: a byte, 0 or 1, per tensor", () => {
    expect(packedIndices(packedMask([0, 2, 3], 4), 4)).toEqual([0, 2, 3])
    expect(packedIndices(new Uint8Array(4), 4)).toEqual([])
    for (const [mask, message] of [
      [new Uint8Array([1, 1, 0]), /has 3 bytes for 4 tensors/],
      [new Uint8Array([1, 1, 0, 0, 1]), /has 5 bytes for 4 tensors/],
      [new Uint8Array([1, 2, 0, 0]), /holds 2 for tensor 1/],
    ] as const) {
      expect(thrown(() => packedIndices(mask, 4))).toMatchObject({ _tag: "ProtocolError", message: expect.stringMatching(message) })
    }
  })

  it("refuses a peer's packing of a tensor that cannot be packed", () => {
    const large = [...metas, { dtype: "uint8", shape: [PACK_BELOW_BYTES], device: "cpu", nbytes: PACK_BELOW_BYTES }]
    const onGpu = [...metas, { dtype: "uint8", shape: [8], device: "cuda:0", nbytes: 8 }]
    for (const [described, message] of [
      [large, /tensor 4 \(1048576 bytes on cpu\) cannot travel packed/],
      [onGpu, /tensor 4 \(8 bytes on cuda:0\) cannot travel packed/],
    ] as const) {
      expect(thrown(() => packingOf(described, [0, 4]))).toMatchObject({ _tag: "ProtocolError", message: expect.stringMatching(message) })
    }
  })
})

describe("packTensors and unpackTensors", () => {
  const value = () => [
    Tensor.arange(6, { dtype: "float64" }).reshape([2, 3]).transpose(0, 1),
    Tensor.zeros([PACK_BELOW_BYTES / 4]),
    Tensor.from([1, 2, 3], { dtype: "int8" }),
    Tensor.full([], 7n, { dtype: "int64" }),
  ]

  it("copy the packed tensors into one block and give them back as views of it, the others as they travelled", () => {
    const tensors = value()
    const metas = tensors.map(tensorMeta)
    const packing = packingOf(metas, packable(tensors)!)
    expect(packing.indices).toEqual([0, 2, 3])
    const travelled = packTensors(tensors, packing)
    expect(travelled.length).toBe(2)
    expect(travelled[1]).toBe(tensors[1])
    const back = unpackTensors(metas, packing, travelled, undefined)
    expect(back[1]).toBe(tensors[1])
    for (const i of [0, 2, 3]) {
      expect(back[i]!.storage).toBe(travelled[0]!.storage)
      expect(back[i]!.equal(tensors[i]!)).toBe(true)
      expect(back[i]!.shape).toEqual(tensors[i]!.shape)
    }
  })

  it("zero the gaps between packed tensors: a block from the host cache holds what an earlier storage left there", async () => {
    const tensors = [Tensor.from([1, 2, 3], { dtype: "int8" }), Tensor.full([PACK_BELOW_BYTES - 1], 4, { dtype: "uint8" })]
    const packing = packingOf(tensors.map(tensorMeta), [0, 1])
    // Two blocks of the size out and dead (HostMemory.test.ts): the next allocation collects and takes one of them.
    for (let i = 0; i < 2; i++) cpuAllocator.allocate(packing.blockBytes[0]!).bytes.fill(0xee)
    await new Promise((resolve) => setImmediate(resolve))
    const before = collections.count
    const [block] = packTensors(tensors, packing)
    expect(collections.count).toBe(before + 1)
    expect([...block!.storage.bytes.subarray(0, 65)]).toEqual([1, 2, 3, ...new Array(61).fill(0), 4])
  })

  it("copy into targets where given", () => {
    const tensors = value()
    const metas = tensors.map(tensorMeta)
    const packing = packingOf(metas, packable(tensors)!)
    const target = tensors.map((t) => Tensor.zeros(t.shape, { dtype: t.dtype }))
    const back = unpackTensors(metas, packing, [packTensors(tensors, packing)[0]!, target[1]!], target)
    back.forEach((t, i) => expect(t).toBe(target[i]))
    for (const i of [0, 2, 3]) expect(target[i]!.equal(tensors[i]!)).toBe(true)
  })
})
