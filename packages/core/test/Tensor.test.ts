import { inspect } from "node:util"
import { describe, expect, it } from "vitest"
import type { Allocator, Storage } from "../src/Allocator.js"
import { nextStorageId, registerDeviceAllocator, withAllocator } from "../src/AllocatorScope.js"
import { cpuAllocator, createCpuMemoryPool } from "../src/CpuMemory.js"
import type { Device } from "../src/Device.js"
import { dtypeNames, type DType } from "../src/DType.js"
import { DeviceError, DTypeError, InvalidArgumentError, OutOfMemoryError, ShapeError } from "../src/Errors.js"
import { Tensor, isTensor } from "../src/Tensor.js"
import { thrown } from "./helpers/errors.ts"

/** Values each dtype represents exactly (beyond 2^53 for 64-bit ints, see the bigint tests). */
const EXACT: { readonly [D in DType]: ReadonlyArray<number> } = {
  float64: [0, -0, 1.5, -2.25, 1e300, Number.MIN_VALUE, Infinity, -Infinity, 0.1],
  float32: [0, -0, 1.5, -2.25, 3.4028234663852886e38, 2 ** -149, Infinity, Math.fround(0.1)],
  float16: [0, -0, 1.5, -2.25, 65504, 2 ** -24, -Infinity, 0.0999755859375],
  bfloat16: [0, -0, 1.5, -2.25, (2 - 2 ** -7) * 2 ** 127, 2 ** -133, Infinity, 3.140625],
  float8_e4m3fn: [0, -0, 1.5, -2.25, 448, -448, 2 ** -9, 0.1015625],
  float8_e5m2: [0, -0, 1.5, -2.5, 57344, 2 ** -16, Infinity, -Infinity],
  int8: [0, 1, -1, 127, -128],
  int16: [0, -1, 32767, -32768],
  int32: [0, -1, 2 ** 31 - 1, -(2 ** 31)],
  int64: [0, -1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER],
  uint8: [0, 1, 255],
  uint16: [0, 65535],
  uint32: [0, 2 ** 32 - 1],
  uint64: [0, Number.MAX_SAFE_INTEGER, 2 ** 63],
  bool: [0, 1],
}

const base = (): Tensor => Tensor.arange(12).view([3, 4])

describe("factories", () => {
  it("empty/zeros/ones/full default to float32 on the cpu", () => {
    const z = Tensor.zeros([2, 3])
    expect(z.dtype).toBe("float32")
    expect(z.device).toBe("cpu")
    expect(z.shape).toEqual([2, 3])
    expect(z.strides).toEqual([3, 1])
    expect(z.offset).toBe(0)
    expect(z.numel).toBe(6)
    expect(z.ndim).toBe(2)
    expect(z.nbytes).toBe(24)
    expect(z.storage.byteLength).toBe(24)
    expect(z.toArray()).toEqual([0, 0, 0, 0, 0, 0])
    expect(Tensor.ones([2], { dtype: "int8" }).toArray()).toEqual([1, 1])
    expect(Tensor.full([2, 2], 7.5, { dtype: "float16" }).toArray()).toEqual([7.5, 7.5, 7.5, 7.5])
    expect(Tensor.full([1], 2n ** 62n, { dtype: "int64" }).typedArray()).toEqual(new BigInt64Array([2n ** 62n]))
    expect(Tensor.empty([4], { dtype: "float64" }).nbytes).toBe(32)
  })

  it("zeros really zeroes reused pool blocks", () => {
    const pool = createCpuMemoryPool({ capacity: 64 })
    const dirty = Tensor.full([4], 9, { allocator: pool })
    pool.free(dirty.storage)
    expect(Tensor.zeros([4], { allocator: pool }).toArray()).toEqual([0, 0, 0, 0])
  })

  it("scalars and empty tensors", () => {
    const s = Tensor.full([], 3)
    expect(s.shape).toEqual([])
    expect(s.numel).toBe(1)
    expect(s.item()).toBe(3)
    expect(s.get()).toBe(3)
    const e = Tensor.zeros([2, 0, 3])
    expect(e.numel).toBe(0)
    expect(e.nbytes).toBe(0)
    expect(e.toArray()).toEqual([])
    expect(e.sum()).toBe(0)
    expect(e.isContiguous()).toBe(true)
  })

  it("validates shapes and dtypes", () => {
    for (const shape of [[-1], [1.5], [NaN], [2 ** 60], ["2"], [2 ** 30, 2 ** 30], new Array(65).fill(1)]) {
      expect(() => Tensor.zeros(shape as Array<number>)).toThrow(ShapeError)
    }
    expect(() => Tensor.zeros(3 as unknown as Array<number>)).toThrow(ShapeError)
    expect(() => Tensor.zeros([2], { dtype: "float128" as DType })).toThrow(DTypeError)
    expect(() => Tensor.zeros([2], { device: "gpu" as Device })).toThrow(DeviceError)
    expect(() => Tensor.zeros([2], { device: "cpu", allocator: { ...cpuAllocator, device: "cuda:0" } })).toThrow(
      DeviceError,
    )
  })

  it("arange", () => {
    expect(Tensor.arange(5).toArray()).toEqual([0, 1, 2, 3, 4])
    expect(Tensor.arange(5, { dtype: "int32" }).dtype).toBe("int32")
    expect(Tensor.arange(2, 8, 2).toArray()).toEqual([2, 4, 6])
    expect(Tensor.arange(2, 9, 2, { dtype: "int64" }).toArray()).toEqual([2, 4, 6, 8])
    expect(Tensor.arange(5, 0, -2).toArray()).toEqual([5, 3, 1])
    expect(Tensor.arange(0, 1, 0.25, { dtype: "float64" }).toArray()).toEqual([0, 0.25, 0.5, 0.75])
    expect(Tensor.arange(3, 1).numel).toBe(0)
    expect(() => Tensor.arange(0, 1, 0)).toThrow(ShapeError)
    expect(() => Tensor.arange(Infinity)).toThrow(ShapeError)
    expect(() => Tensor.arange(NaN)).toThrow(ShapeError)
  })

  it("randn with a seed is deterministic and roughly N(0, 1)", () => {
    const a = Tensor.randn([100_000], { seed: 42, dtype: "float64" })
    const b = Tensor.randn([100_000], { seed: 42, dtype: "float64" })
    expect(a.equal(b)).toBe(true)
    expect(Tensor.randn([8], { seed: 43 }).equal(Tensor.randn([8], { seed: 42 }))).toBe(false)
    expect(Tensor.randn([8], { seed: 2 ** 40 }).equal(Tensor.randn([8], { seed: 2 ** 40 + 1 }))).toBe(false)
    const xs = a.toArray()
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length
    const variance = xs.reduce((s, x) => s + (x - mean) ** 2, 0) / xs.length
    expect(Math.abs(mean)).toBeLessThan(0.02)
    expect(Math.abs(variance - 1)).toBeLessThan(0.02)
    const within1 = xs.filter((x) => Math.abs(x) < 1).length / xs.length
    expect(Math.abs(within1 - 0.6827)).toBeLessThan(0.01)
    expect(xs.every(Number.isFinite)).toBe(true)
    // float32 samples are the float64 samples rounded.
    expect(Tensor.randn([4], { seed: 42 }).toArray()).toEqual(xs.slice(0, 4).map(Math.fround))
  })

  it("randn without a seed is random, and needs a float dtype", () => {
    expect(Tensor.randn([16]).equal(Tensor.randn([16]))).toBe(false)
    expect(Tensor.randn([3, 3], { seed: 1, dtype: "bfloat16" }).dtype).toBe("bfloat16")
    expect(() => Tensor.randn([2], { dtype: "int32" })).toThrow(DTypeError)
  })

  it("from nested arrays, bigints, scalars and typed arrays", () => {
    const t = Tensor.from([
      [1, 2, 3],
      [4, 5, 6],
    ])
    expect(t.shape).toEqual([2, 3])
    expect(t.dtype).toBe("float32")
    expect(t.toArray()).toEqual([1, 2, 3, 4, 5, 6])
    const big = Tensor.from([2n ** 63n - 1n, -(2n ** 63n)])
    expect(big.dtype).toBe("int64")
    expect(big.typedArray()).toEqual(new BigInt64Array([2n ** 63n - 1n, -(2n ** 63n)]))
    expect(Tensor.from(5).shape).toEqual([])
    expect(Tensor.from(5n).dtype).toBe("int64")
    expect(Tensor.from([]).shape).toEqual([0])
    expect(Tensor.from([[], []]).shape).toEqual([2, 0])
    expect(Tensor.from(new Int16Array([1, -2])).dtype).toBe("int16")
    expect(Tensor.from(new Uint8ClampedArray([1, 255])).dtype).toBe("uint8")
    expect(Tensor.from(new BigUint64Array([2n ** 64n - 1n])).dtype).toBe("uint64")
    expect(Tensor.from(new Float64Array([0.1])).item()).toBe(0.1)
    expect(Tensor.from(new Float64Array([0.1]), { dtype: "float32" }).item()).toBe(Math.fround(0.1))
    expect(Tensor.from(new Uint16Array([1, 2]), { dtype: "float16" }).toArray()).toEqual([1, 2])
    const sub = new Float32Array([1, 2, 3, 4]).subarray(1, 3)
    expect(Tensor.from(sub).toArray()).toEqual([2, 3])
  })

  it("from copies its input", () => {
    const src = new Float32Array([1, 2])
    const t = Tensor.from(src)
    src[0] = 9
    expect(t.toArray()).toEqual([1, 2])
    expect(t.storage.bytes.buffer).toBeInstanceOf(SharedArrayBuffer)
  })

  it("from rejects ragged data and non-numbers", () => {
    expect(() => Tensor.from([[1, 2], [3]])).toThrow(ShapeError)
    expect(() => Tensor.from([[1, 2], 3] as unknown as Array<number>)).toThrow(ShapeError)
    expect(() => Tensor.from([1, [2]] as unknown as Array<number>)).toThrow(DTypeError)
    expect(() => Tensor.from(["1"] as unknown as Array<number>)).toThrow(DTypeError)
    expect(() => Tensor.from(new DataView(new ArrayBuffer(4)) as unknown as Uint8Array)).toThrow(DTypeError)
    const cyclic: Array<unknown> = []
    cyclic.push(cyclic)
    expect(() => Tensor.from(cyclic as Array<number>)).toThrow(ShapeError)
  })
})

describe.each(dtypeNames)("%s elements", (dtype) => {
  it("round-trip exactly through set/get, from/toArray and fill_", () => {
    const values = EXACT[dtype]
    const t = Tensor.from([...values], { dtype })
    expect(t.dtype).toBe(dtype)
    expect(t.toArray()).toEqual(values)
    const u = Tensor.zeros([values.length], { dtype })
    values.forEach((v, i) => u.set([i], v))
    values.forEach((v, i) => expect(Object.is(u.get(i), v)).toBe(true))
    for (const v of values) expect(Object.is(Tensor.full([1], v, { dtype }).item(), v)).toBe(true)
    expect(t.equal(u)).toBe(true)
    expect(Tensor.from(t.contiguousBytes().slice(), { dtype: "uint8" }).nbytes).toBe(t.nbytes)
  })

  it("is stored in its typed array class", () => {
    const t = Tensor.ones([3], { dtype })
    const arr = t.typedArray()
    expect(arr.length).toBe(3)
    expect(arr.buffer).toBe(t.storage.bytes.buffer)
  })
})

describe("element semantics", () => {
  it("floats store NaN", () => {
    for (const dtype of ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"] as const) {
      expect(Tensor.full([1], NaN, { dtype }).item()).toBeNaN()
    }
  })

  it("narrow floats store bit patterns and round", () => {
    const h = Tensor.from([1, 0.1, 65520], { dtype: "float16" })
    expect([...h.typedArray()]).toEqual([0x3c00, 0x2e66, 0x7c00])
    const b = Tensor.from([1, Math.PI], { dtype: "bfloat16" })
    expect([...b.typedArray()]).toEqual([0x3f80, 0x4049])
    const e4 = Tensor.from([1, 500, -500], { dtype: "float8_e4m3fn" })
    expect([...e4.typedArray()]).toEqual([0x38, 0x7f, 0xff])
    const e5 = Tensor.from([1, 70000], { dtype: "float8_e5m2" })
    expect([...e5.typedArray()]).toEqual([0x3c, 0x7c])
  })

  it("integers wrap like the typed arrays", () => {
    expect(Tensor.from([130, -129, 1.9, -1.9, NaN, Infinity], { dtype: "int8" }).toArray()).toEqual([-126, 127, 1, -1, 0, 0])
    expect(Tensor.from([-1, 256], { dtype: "uint8" }).toArray()).toEqual([255, 0])
    expect(Tensor.from([2 ** 32 + 5], { dtype: "uint32" }).toArray()).toEqual([5])
    const i64 = Tensor.zeros([3], { dtype: "int64" })
    i64.set([0], 2n ** 63n)
    i64.set([1], -1.7)
    i64.set([2], NaN)
    expect(i64.typedArray()).toEqual(new BigInt64Array([-(2n ** 63n), -1n, 0n]))
    const u64 = Tensor.from([-1n], { dtype: "uint64" })
    expect(u64.typedArray()).toEqual(new BigUint64Array([2n ** 64n - 1n]))
  })

  it("64-bit integers read as numbers lose precision beyond 2^53 but stay exact in typedArray", () => {
    const t = Tensor.from([2n ** 53n + 1n], { dtype: "int64" })
    expect(t.item()).toBe(2 ** 53)
    expect(t.typedArray()[0]).toBe(2n ** 53n + 1n)
  })

  it("bool stores 0/1 (NaN is true) and reads any non-zero byte as true", () => {
    const t = Tensor.from([0, 5, -1, NaN, 0.5], { dtype: "bool" })
    expect([...t.typedArray()]).toEqual([0, 1, 1, 1, 1])
    const raw = cpuAllocator.allocate(2)
    raw.bytes.set([0, 7])
    expect(Tensor.fromStorage(raw, { dtype: "bool", shape: [2] }).toArray()).toEqual([0, 1])
  })
})

describe("views", () => {
  it("share storage: fill_ on a slice is seen by the base", () => {
    const t = base()
    t.slice(1, 1, 3).fill_(-1)
    expect(t.toArray()).toEqual([0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11])
    t.row(2).fill_(0)
    t.select(1, 0).add_(100)
    expect(t.toArray()).toEqual([100, -1, -1, 3, 104, -1, -1, 7, 100, 0, 0, 0])
    t.transpose(0, 1).set([3, 0], 42)
    expect(t.get(0, 3)).toBe(42)
  })

  it("a large contiguous fill_ writes exactly its own elements, for every element size", () => {
    const rows = 3
    // Rows past the size from which a fill goes through Buffer.fill, the second starting at an odd element.
    for (const cols of [1 << 17, (5 << 19) + 3]) {
      for (const [dtype, value] of [["float32", 1.5], ["bfloat16", -2], ["int64", 2n ** 40n + 3n], ["uint8", 7], ["float64", Math.PI]] as const) {
        const t = Tensor.zeros([rows, cols], { dtype })
        t.row(1).fill_(value)
        const rowsRead = [0, 1, 2].map((r) => t.row(r))
        // Every byte against Node's own fill of one element's bytes (the small-tensor path).
        const element = Tensor.full([1], value, { dtype }).storage.bytes
        const row = rowsRead[1]
        const written = Buffer.from(row.storage.bytes.buffer, row.storage.bytes.byteOffset + row.byteOffset, row.nbytes)
        expect(written.equals(Buffer.alloc(row.nbytes, element))).toBe(true)
        const read = Number(value)
        expect([row.get(0), row.get(cols - 1)]).toEqual([read, read])
        expect([rowsRead[0].get(cols - 1), rowsRead[2].get(0)]).toEqual([0, 0])
        expect(Number(rowsRead[0].sum()) + Number(rowsRead[2].sum())).toBe(0)
      }
    }
  })

  it("slice follows Python semantics", () => {
    const t = base()
    const s = t.slice(1, 1, 4, 2)
    expect(s.shape).toEqual([3, 2])
    expect(s.strides).toEqual([4, 2])
    expect(s.offset).toBe(1)
    expect(s.toArray()).toEqual([1, 3, 5, 7, 9, 11])
    expect(s.isContiguous()).toBe(false)
    const neg = t.slice(0, -2)
    expect(neg.shape).toEqual([2, 4])
    expect(neg.offset).toBe(4)
    expect(t.slice(-1, -3, -1).toArray()).toEqual([1, 2, 5, 6, 9, 10])
    expect(t.slice(0, 1).isContiguous()).toBe(true)
    expect(t.slice(0, -100, 100).shape).toEqual([3, 4])
    expect(t.slice(0, 2, 1).shape).toEqual([0, 4])
    expect(t.slice(1, 5).shape).toEqual([3, 0])
    expect(t.slice(0, 0, 3, 2).toArray()).toEqual([0, 1, 2, 3, 8, 9, 10, 11])
    expect(() => t.slice(0, 0, 3, 0)).toThrow(ShapeError)
    expect(() => t.slice(0, 0, 3, -1)).toThrow(ShapeError)
    expect(() => t.slice(2, 0)).toThrow(ShapeError)
    expect(() => t.slice(0, 0.5)).toThrow(ShapeError)
  })

  it("select and row", () => {
    const t = base()
    const col = t.select(1, -1)
    expect(col.shape).toEqual([3])
    expect(col.strides).toEqual([4])
    expect(col.offset).toBe(3)
    expect(col.toArray()).toEqual([3, 7, 11])
    expect(t.row(1).toArray()).toEqual([4, 5, 6, 7])
    expect(t.row(-1).offset).toBe(8)
    expect(t.row(1).row(2).item()).toBe(6)
    expect(() => t.row(3)).toThrow(ShapeError)
    expect(() => t.select(1, -5)).toThrow(ShapeError)
    expect(() => t.row(0).row(0).row(0)).toThrow(ShapeError)
  })

  it("transpose", () => {
    const t = base()
    const tt = t.transpose(0, 1)
    expect(tt.shape).toEqual([4, 3])
    expect(tt.strides).toEqual([1, 4])
    expect(tt.isContiguous()).toBe(false)
    expect(tt.toArray()).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    expect(t.transpose(-1, -2).equal(tt)).toBe(true)
    expect(tt.transpose(0, 1).isContiguous()).toBe(true)
    expect(tt.storage).toBe(t.storage)
  })

  it("view and reshape", () => {
    const t = base()
    const v = t.view([2, -1])
    expect(v.shape).toEqual([2, 6])
    expect(v.storage).toBe(t.storage)
    expect(t.view([12]).toArray()).toEqual(t.toArray())
    expect(() => t.view([5, -1])).toThrow(ShapeError)
    expect(() => t.view([-1, -1])).toThrow(ShapeError)
    expect(() => t.view([13])).toThrow(ShapeError)
    expect(() => t.view([-2, -6])).toThrow(ShapeError)
    const tt = t.transpose(0, 1)
    expect(() => tt.view([12])).toThrow(ShapeError)
    const r = tt.reshape([12])
    expect(r.storage).not.toBe(t.storage)
    expect(r.toArray()).toEqual(tt.toArray())
    expect(t.reshape([4, 3]).storage).toBe(t.storage)
    expect(Tensor.zeros([0, 3]).view([-1, 2]).shape).toEqual([0, 2])
    expect(() => Tensor.zeros([0, 3]).view([0, -1])).toThrow(ShapeError)
    expect(tt.flatten().toArray()).toEqual(tt.toArray())
    expect(Tensor.full([], 1).flatten().shape).toEqual([1])
  })

  it("contiguous, clone and to", () => {
    const t = base()
    expect(t.contiguous()).toBe(t)
    const tt = t.transpose(0, 1)
    const c = tt.contiguous()
    expect(c).not.toBe(tt)
    expect(c.isContiguous()).toBe(true)
    expect(c.strides).toEqual([3, 1])
    expect(c.toArray()).toEqual(tt.toArray())
    c.fill_(0)
    expect(t.sum()).toBe(66)
    const k = t.clone()
    expect(k.storage).not.toBe(t.storage)
    k.fill_(1)
    expect(t.get(0, 0)).toBe(0)
    const s = t.slice(1, 1, 3).clone()
    expect(s.offset).toBe(0)
    expect(s.storage.byteLength).toBe(24)
    expect(t.to("cpu")).toBe(t)
    expect(() => t.to("cuda" as Device)).toThrow(DeviceError)
  })

  it("clone and contiguous copy raw bits (NaN payloads survive)", () => {
    const h = Tensor.full([4], NaN, { dtype: "float16" })
    h.typedArray()[2] = 0x7d01
    expect([...h.clone().typedArray()]).toEqual([0x7e00, 0x7e00, 0x7d01, 0x7e00])
    expect([...h.slice(0, 0, 4, 2).contiguous().typedArray()]).toEqual([0x7e00, 0x7d01])
  })

  it("clone allocates from the scoped allocator", () => {
    const pool = createCpuMemoryPool({ capacity: 1024 })
    const t = base()
    expect(withAllocator(pool, () => t.clone()).storage.allocator).toBe(pool)
    expect(withAllocator(pool, () => t.transpose(0, 1).contiguous()).storage.allocator).toBe(pool)
  })
})

describe("ops", () => {
  it("add_ tensors and scalars", () => {
    const a = Tensor.from([1, 2, 3])
    a.add_(Tensor.from([10, 20, 30])).add_(0.5)
    expect(a.toArray()).toEqual([11.5, 22.5, 33.5])
    const t = base()
    t.add_(t.transpose(0, 1).transpose(0, 1))
    expect(t.toArray()).toEqual(base().toArray().map((x) => 2 * x))
    const m = base()
    m.slice(1, 0, 2).add_(Tensor.ones([2, 3]).transpose(0, 1))
    expect(m.toArray()).toEqual([1, 2, 2, 3, 5, 6, 6, 7, 9, 10, 10, 11])
  })

  it("add_ of an operand over the memory it writes reads the operand as it was, as numpy does", () => {
    const m = Tensor.from([0, 1, 2, 3]).view([2, 2])
    m.add_(m.transpose(0, 1))
    expect(m.toArray()).toEqual([0, 3, 3, 6])
    const n = Tensor.arange(9).view([3, 3])
    n.add_(n.transpose(0, 1))
    expect(n.toArray()).toEqual([0, 4, 8, 4, 8, 12, 8, 12, 16])
    const t = Tensor.ones([5])
    t.slice(0, 1).add_(t.slice(0, 0, 4))
    expect(t.toArray()).toEqual([1, 2, 2, 2, 2])
    // A view over memory of its own that it shares with nothing it writes needs no copy.
    const halves = Tensor.from([1, 2, 3, 4])
    halves.slice(0, 0, 2).add_(halves.slice(0, 2, 4))
    expect(halves.toArray()).toEqual([4, 6, 3, 4])
  })

  it("add_ refuses to write to a tensor whose elements share memory (a zero stride)", () => {
    const zero = Tensor.fromStorage(Tensor.zeros([1]).storage, { dtype: "float32", shape: [4], strides: [0] })
    expect(thrown(() => zero.add_(1))).toMatchObject({ _tag: "UnsupportedOperationError", message: expect.stringContaining("zero stride") })
    expect(thrown(() => zero.add_(Tensor.ones([4])))).toMatchObject({ _tag: "UnsupportedOperationError" })
    expect(zero.toArray()).toEqual([0, 0, 0, 0])
  })

  it("clone and contiguous of a strided view copy every element bit for bit, a signalling NaN's too", () => {
    const f32 = Tensor.empty([3, 2])
    new Uint32Array(f32.storage.bytes.buffer, f32.storage.bytes.byteOffset, 6).fill(0x7f800001)
    const copied = f32.transpose(0, 1).contiguous()
    expect([...new Uint32Array(copied.storage.bytes.buffer, copied.storage.bytes.byteOffset, 6)]).toEqual(new Array(6).fill(0x7f800001))
    const f64 = Tensor.empty([2, 2], { dtype: "float64" })
    new BigUint64Array(f64.storage.bytes.buffer, f64.storage.bytes.byteOffset, 4).fill(0x7ff0000000000001n)
    const cloned = f64.transpose(0, 1).clone()
    expect([...new BigUint64Array(cloned.storage.bytes.buffer, cloned.storage.bytes.byteOffset, 4)]).toEqual(new Array(4).fill(0x7ff0000000000001n))
  })

  it("a bigint for a narrower integer wraps modulo its bits, exactly past 2^53 too", () => {
    expect(Tensor.zeros([1], { dtype: "int32" }).set([0], 2n ** 53n + 3n).item()).toBe(3)
    expect(Tensor.full([1], 2n ** 64n + 7n, { dtype: "uint8" }).item()).toBe(7)
    expect(Tensor.from([2n ** 53n + 1n], { dtype: "int32" }).item()).toBe(1)
    expect(Tensor.from([-(2n ** 40n) - 1n], { dtype: "int16" }).item()).toBe(-1)
    expect(Tensor.from([5], { dtype: "int32" }).add_(2n ** 53n + 3n).item()).toBe(8)
    expect(Tensor.from([5], { dtype: "uint16" }).add_(-(2n ** 60n) - 1n).item()).toBe(4)
  })

  it("arange of 64-bit integers counts exactly past 2^53", () => {
    expect([...(Tensor.arange(2 ** 53, 2 ** 53 + 4, 1, { dtype: "int64" }).typedArray() as BigInt64Array)]).toEqual([2n ** 53n, 2n ** 53n + 1n, 2n ** 53n + 2n, 2n ** 53n + 3n])
    expect(Tensor.arange(0, 3, 1.5, { dtype: "int64" }).toArray()).toEqual([0, 1])
  })

  it("allclose refuses tolerances that are not numbers >= 0", () => {
    for (const opts of [{ rtol: "1" }, { atol: -1 }, { rtol: Number.NaN }, null] as Array<never>) {
      expect(thrown(() => Tensor.from([1]).allclose(Tensor.from([2]), opts))).toMatchObject({ _tag: "InvalidArgumentError" })
    }
    expect(Tensor.from([1]).allclose(Tensor.from([1.5]), { atol: 0.5 })).toBe(true)
  })

  it("add_ rounds narrow floats and wraps integers", () => {
    const h = Tensor.from([1], { dtype: "float16" })
    h.add_(2 ** -11)
    expect(h.item()).toBe(1)
    h.add_(2 ** -10)
    expect(h.item()).toBe(1 + 2 ** -10)
    const i = Tensor.from([2 ** 31 - 1], { dtype: "int32" })
    i.add_(Tensor.from([1], { dtype: "int32" }))
    expect(i.item()).toBe(-(2 ** 31))
    const u8 = Tensor.from([250], { dtype: "uint8" })
    expect(u8.add_(10).item()).toBe(4)
    const i64 = Tensor.from([2n ** 63n - 1n])
    i64.add_(1n)
    expect(i64.typedArray()[0]).toBe(-(2n ** 63n))
    i64.add_(Tensor.from([5n]))
    expect(i64.typedArray()[0]).toBe(-(2n ** 63n) + 5n)
    const b = Tensor.from([0, 1, 0], { dtype: "bool" })
    b.add_(Tensor.from([0, 1, 1], { dtype: "bool" }))
    expect(b.toArray()).toEqual([0, 1, 1])
  })

  it("add_ checks dtype and shape", () => {
    const a = Tensor.zeros([3])
    expect(() => a.add_(Tensor.zeros([3], { dtype: "float64" }))).toThrow(DTypeError)
    expect(() => a.add_(Tensor.zeros([4]))).toThrow(ShapeError)
    expect(() => a.add_(Tensor.zeros([3, 1]))).toThrow(ShapeError)
    expect(() => Tensor.zeros([2], { dtype: "int32" }).add_(0.5)).toThrow(DTypeError)
    expect(() => Tensor.zeros([2], { dtype: "int64" }).add_(0.5)).toThrow(DTypeError)
  })

  it("sum", () => {
    expect(base().sum()).toBe(66)
    expect(base().slice(1, 0, 4, 3).sum()).toBe(0 + 3 + 4 + 7 + 8 + 11)
    expect(Tensor.from([2n ** 62n, 2n ** 62n, -(2n ** 62n)]).sum()).toBe(2 ** 62)
    expect(Tensor.from([1, 1, 0], { dtype: "bool" }).sum()).toBe(2)
    expect(Tensor.from([0.5, 0.25], { dtype: "float8_e5m2" }).sum()).toBe(0.75)
  })

  it("allclose and equal", () => {
    const a = Tensor.from([1, 2, 3], { dtype: "float64" })
    const b = Tensor.from([1, 2, 3 + 1e-6], { dtype: "float64" })
    expect(a.allclose(b)).toBe(true)
    expect(Tensor.allclose(a, b, { rtol: 0, atol: 1e-7 })).toBe(false)
    expect(a.allclose(Tensor.from([1, 2, 3]))).toBe(true)
    expect(Tensor.from([NaN]).allclose(Tensor.from([NaN]))).toBe(false)
    expect(Tensor.from([Infinity]).allclose(Tensor.from([Infinity]))).toBe(true)
    expect(Tensor.from([Infinity]).allclose(Tensor.from([-Infinity]))).toBe(false)
    expect(() => a.allclose(Tensor.zeros([2]))).toThrow(ShapeError)
    expect(a.equal(a.clone())).toBe(true)
    expect(a.equal(b)).toBe(false)
    expect(a.equal(Tensor.from([1, 2, 3]))).toBe(false)
    expect(a.equal(a.view([3, 1]))).toBe(false)
    expect(Tensor.from([NaN]).equal(Tensor.from([NaN]))).toBe(false)
    expect(Tensor.from([-0]).equal(Tensor.from([0]))).toBe(true)
    expect(Tensor.from([2n ** 60n + 1n]).equal(Tensor.from([2n ** 60n]))).toBe(false)
    expect(base().transpose(0, 1).equal(base().transpose(0, 1).contiguous())).toBe(true)
  })

  it("operands of the wrong kind are typed errors, not NaN elements or a TypeError", () => {
    const t = Tensor.zeros([2])
    for (const value of ["1", null, undefined, {}] as Array<never>) {
      expect(thrown(() => t.fill_(value))).toMatchObject({ _tag: "InvalidArgumentError", argument: "value" })
      expect(thrown(() => t.add_(value))).toMatchObject({ _tag: "InvalidArgumentError", argument: "value" })
      expect(thrown(() => t.set([0], value))).toMatchObject({ _tag: "InvalidArgumentError", argument: "value" })
      expect(thrown(() => Tensor.full([2], value))).toMatchObject({ _tag: "InvalidArgumentError", argument: "value" })
      if (value !== undefined) expect(thrown(() => Tensor.randn([2], { seed: value }))).toMatchObject({ _tag: "InvalidArgumentError", argument: "seed" })
    }
    for (const other of [null, undefined, [0, 0], 0] as Array<never>) {
      expect(() => t.equal(other)).toThrow(InvalidArgumentError)
      expect(() => t.allclose(other)).toThrow(InvalidArgumentError)
      expect(() => Tensor.allclose(other, t)).toThrow(InvalidArgumentError)
    }
    expect([...t.toArray()]).toEqual([0, 0])
  })

  it("get, set and item check their indices", () => {
    const t = base()
    expect(t.get(2, -1)).toBe(11)
    t.set([-1, 0], 99)
    expect(t.get(2, 0)).toBe(99)
    expect(() => t.get(3, 0)).toThrow(ShapeError)
    expect(() => t.get(0)).toThrow(ShapeError)
    expect(() => t.get(0, 0.5)).toThrow(ShapeError)
    expect(() => t.set([0, 0, 0], 1)).toThrow(ShapeError)
    expect(() => t.item()).toThrow(ShapeError)
    expect(Tensor.from([[5]]).item()).toBe(5)
  })

  it("contiguousBytes is a view when contiguous and a copy otherwise", () => {
    const t = Tensor.arange(4, { dtype: "int16" })
    const view = t.slice(0, 1, 3).contiguousBytes()
    expect(view.buffer).toBe(t.storage.bytes.buffer)
    expect(view.byteOffset).toBe(2)
    expect([...view]).toEqual([1, 0, 2, 0])
    const strided = t.slice(0, 0, 4, 2).contiguousBytes()
    expect(strided.buffer).not.toBe(t.storage.bytes.buffer)
    expect([...strided]).toEqual([0, 0, 2, 0])
  })

  it("typedArray views contiguous tensors only", () => {
    const t = base()
    const row = t.row(1).typedArray()
    expect(row).toBeInstanceOf(Float32Array)
    expect([...row]).toEqual([4, 5, 6, 7])
    row[0] = -4
    expect(t.get(1, 0)).toBe(-4)
    expect(() => t.transpose(0, 1).typedArray()).toThrow(ShapeError)
    // An empty view may start past its storage's end: it reads nothing, like its other accessors.
    const empty = Tensor.zeros([0, 5]).slice(1, 3)
    expect(empty.shape).toEqual([0, 2])
    expect(empty.typedArray()).toEqual(new Float32Array(0))
    expect(Tensor.zeros([0, 5]).select(1, 4).typedArray().length).toBe(0)
  })

  it("a memory pool larger than the process can address is an OutOfMemoryError", () => {
    expect(() => createCpuMemoryPool({ capacity: 2 ** 50 })).toThrow(OutOfMemoryError)
  })

  it("toString and inspect print a short summary", () => {
    expect(String(base())).toBe("Tensor(float32, [3, 4], cpu) [0, 1, 2, 3, 4, 5, ...]")
    expect(inspect(Tensor.from([0.1, 2]))).toBe("Tensor(float32, [2], cpu) [0.1, 2]")
    expect(String(Tensor.from([0.1], { dtype: "bfloat16" }))).toBe("Tensor(bfloat16, [1], cpu) [0.1001]")
    expect(String(Tensor.from([2n ** 63n - 1n]))).toBe("Tensor(int64, [1], cpu) [9223372036854775807]")
    expect(String(base().transpose(0, 1))).toBe("Tensor(float32, [4, 3], cpu) [0, 4, 8, 1, 5, 9, ...]")
    expect(String(Tensor.zeros([0]))).toBe("Tensor(float32, [0], cpu) []")
    expect(String(Tensor.full([], 1, { dtype: "bool" }))).toBe("Tensor(bool, [], cpu) [1]")
  })

  it("toString of a tensor over a freed pool block does not throw", () => {
    const pool = createCpuMemoryPool({ capacity: 64 })
    const t = Tensor.zeros([2], { allocator: pool })
    pool.free(t.storage)
    expect(String(t)).toMatch(/^Tensor\(float32, \[2\], cpu\) <storage \d+ was freed/)
  })
})

describe("isTensor", () => {
  it("recognizes tensors by a global brand", () => {
    expect(isTensor(base())).toBe(true)
    expect(isTensor({ shape: [1] })).toBe(false)
    expect(isTensor(null)).toBe(false)
    expect(isTensor(3)).toBe(false)
    // What a duplicated copy of this module would produce.
    expect(isTensor({ [Symbol.for("tensorlane.Tensor")]: true })).toBe(true)
  })
})

describe("fromStorage", () => {

  it("refuses what is not a storage, and missing options, as invalid arguments", () => {
    for (const storage of [undefined, new Uint8Array(16), {}] as Array<never>) {
      expect(thrown(() => Tensor.fromStorage(storage, { dtype: "float32", shape: [2] }))).toMatchObject({ _tag: "InvalidArgumentError", argument: "storage" })
    }
    expect(thrown(() => Tensor.fromStorage(Tensor.zeros([2]).storage, undefined as never))).toMatchObject({ _tag: "InvalidArgumentError", argument: "opts" })
  })
  const storage = (bytes: number): Storage => cpuAllocator.allocate(bytes)

  it("views existing storage", () => {
    const s = storage(48)
    const t = Tensor.fromStorage(s, { dtype: "float32", shape: [3, 4] })
    expect(t.strides).toEqual([4, 1])
    t.fill_(1)
    expect(Tensor.fromStorage(s, { dtype: "float32", shape: [2, 2], strides: [4, 2], offset: 5 }).toArray()).toEqual([
      1, 1, 1, 1,
    ])
    expect(Tensor.fromStorage(s, { dtype: "float64", shape: [6] }).nbytes).toBe(48)
    expect(Tensor.fromStorage(s, { dtype: "float32", shape: [12], offset: 0 }).storage).toBe(s)
    expect(Tensor.fromStorage(s, { dtype: "float32", shape: [0], offset: 12 }).numel).toBe(0)
    expect(Tensor.fromStorage(s, { dtype: "float32", shape: [1000], strides: [0], offset: 11 }).sum()).toBe(1000)
    expect(Tensor.fromStorage(storage(0), { dtype: "int8", shape: [0] }).numel).toBe(0)
  })

  it("rejects views that do not fit", () => {
    const s = storage(48)
    const bad: ReadonlyArray<Parameters<typeof Tensor.fromStorage>[1]> = [
      { dtype: "float32", shape: [13] },
      { dtype: "float64", shape: [7] },
      { dtype: "float32", shape: [12], offset: 1 },
      { dtype: "float32", shape: [3, 4], strides: [4, 2] },
      { dtype: "float32", shape: [2], strides: [12] },
      { dtype: "float32", shape: [0], offset: 13 },
      { dtype: "float32", shape: [1], offset: 12 },
    ]
    for (const opts of bad) expect(() => Tensor.fromStorage(s, opts), JSON.stringify(opts)).toThrow(ShapeError)
  })

  it("rejects hostile metadata", () => {
    const s = storage(64)
    const hostile: ReadonlyArray<Record<string, unknown>> = [
      { shape: [-1] },
      { shape: [NaN] },
      { shape: [1.5] },
      { shape: [Infinity] },
      { shape: [2 ** 60] },
      { shape: [2 ** 30, 2 ** 30] },
      { shape: [2 ** 27, 2 ** 27, 0] },
      { shape: [2 ** 51], strides: [0] }, // fits, but 2^51 float32 elements are more than 2^53 bytes
      { shape: "4" },
      { shape: { length: 1, 0: 4 } },
      { shape: new Array(65).fill(1) },
      { shape: [4], strides: [-1] },
      { shape: [4], strides: [0.5] },
      { shape: [4], strides: [NaN] },
      { shape: [4], strides: [1, 1] },
      { shape: [4], strides: "1" },
      { shape: [2, 2], strides: [2 ** 52, 2 ** 52] },
      { shape: [3], strides: [2 ** 52] },
      { shape: [4], offset: -1 },
      { shape: [4], offset: 0.5 },
      { shape: [4], offset: NaN },
      { shape: [4], offset: 2 ** 60 },
      { shape: [4], offset: "0" },
    ]
    for (const opts of hostile) {
      const e = thrown(() => Tensor.fromStorage(s, { dtype: "float32", ...opts } as never))
      expect(e, JSON.stringify(opts)).toBeInstanceOf(ShapeError)
    }
    expect(() => Tensor.fromStorage(s, { dtype: "float99" as DType, shape: [1] })).toThrow(DTypeError)
    expect(() => Tensor.fromStorage({ ...s, byteLength: -1 } as Storage, { dtype: "int8", shape: [1] })).toThrow(
      ShapeError,
    )
  })
})

describe("device tensors", () => {
  // A stand-in for a native package: "device" memory lives in host buffers the tensor cannot see.
  const deviceMemory = new Map<number, Uint8Array>()
  const fakeCuda = (device: Device): Allocator => {
    const allocator: Allocator = {
      name: `fake-${device}`,
      device,
      allocate(byteLength) {
        const id = nextStorageId()
        deviceMemory.set(id, new Uint8Array(byteLength))
        return {
          id,
          device,
          byteLength,
          handle: { id },
          allocator,
          get bytes(): Uint8Array {
            throw new DeviceError({ message: `${device} memory is not host accessible`, device })
          },
        }
      },
      free(storage) {
        deviceMemory.delete(storage.id)
      },
      copy(src, srcOffset, dst, dstOffset, byteLength) {
        const from = src.device === "cpu" ? src.bytes : deviceMemory.get(src.id)!
        const to = dst.device === "cpu" ? dst.bytes : deviceMemory.get(dst.id)!
        to.set(from.subarray(srcOffset, srcOffset + byteLength), dstOffset)
      },
    }
    return allocator
  }
  registerDeviceAllocator("cuda", fakeCuda)

  it("move to a device and back through the allocators' copy", () => {
    const t = base()
    const d = t.to("cuda:0")
    expect(d.device).toBe("cuda:0")
    expect(d.storage.allocator.name).toBe("fake-cuda:0")
    expect(d.to("cuda:0")).toBe(d)
    const back = d.to("cpu")
    expect(back.device).toBe("cpu")
    expect(back.equal(t)).toBe(true)
    expect(d.to("cuda:1").to("cpu").equal(t)).toBe(true)
  })

  it("strided host tensors are made contiguous before the copy", () => {
    const tt = base().transpose(0, 1)
    const d = tt.to("cuda:0")
    expect(d.isContiguous()).toBe(true)
    expect(d.storage.byteLength).toBe(48)
    expect(d.to("cpu").toArray()).toEqual(tt.toArray())
  })

  it("device views copy the span they cover and keep their strides", () => {
    const d = base().to("cuda:0")
    const v = d.slice(1, 1, 3).transpose(0, 1)
    expect(v.device).toBe("cuda:0")
    const h = v.to("cpu")
    expect(h.toArray()).toEqual([1, 5, 9, 2, 6, 10])
    expect(h.storage.byteLength).toBe(4 * 10)
    const c = v.clone()
    expect(c.device).toBe("cuda:0")
    expect(c.storage === d.storage).toBe(false) // expect() would read the throwing bytes getter to describe it
    expect(c.to("cpu").toArray()).toEqual([1, 5, 9, 2, 6, 10])
  })

  it("factories build on the host and copy to the device", () => {
    expect(Tensor.ones([2, 2], { device: "cuda:0" }).to("cpu").toArray()).toEqual([1, 1, 1, 1])
    expect(Tensor.from([1, 2], { device: "cuda:1", dtype: "bfloat16" }).to("cpu").toArray()).toEqual([1, 2])
    expect(Tensor.randn([4], { seed: 3, device: "cuda:0" }).to("cpu").equal(Tensor.randn([4], { seed: 3 }))).toBe(true)
    expect(Tensor.arange(3, { device: "cuda:0" }).to("cpu").toArray()).toEqual([0, 1, 2])
    const e = Tensor.empty([3], { device: "cuda:0", dtype: "float16" })
    expect(e.storage.byteLength).toBe(6)
    expect(Tensor.zeros([0], { device: "cuda:0" }).to("cpu").numel).toBe(0)
  })

  it("CPU ops on a device tensor fail with a DeviceError naming the device", () => {
    const d = Tensor.ones([2, 2], { device: "cuda:1" })
    const ops: ReadonlyArray<() => unknown> = [
      () => d.fill_(1),
      () => d.add_(1),
      () => Tensor.zeros([2, 2]).add_(d),
      () => d.sum(),
      () => d.toArray(),
      () => d.item(),
      () => d.get(0, 0),
      () => d.set([0, 0], 1),
      () => d.equal(d),
      () => d.allclose(d),
      () => d.contiguousBytes(),
      () => d.typedArray(),
      () => d.transpose(0, 1).contiguous(),
    ]
    for (const op of ops) {
      const e = thrown(op)
      expect(e).toBeInstanceOf(DeviceError)
      expect((e as DeviceError).device).toBe("cuda:1")
      expect((e as DeviceError).message).toContain("cuda:1")
    }
    expect(String(d)).toBe("Tensor(float32, [2, 2], cuda:1)")
    expect(d.view([4]).shape).toEqual([4])
    expect(d.row(1).offset).toBe(2)
  })

  it("fails with a DeviceError when no allocator can copy", () => {
    const noCopy: Allocator = { ...fakeCuda("cuda:0"), copy: undefined }
    expect(() => base().to("cuda:0", { allocator: noCopy })).toThrow(DeviceError)
    expect(() => base().to("cuda:0", { allocator: cpuAllocator })).toThrow(DeviceError)
  })
})
