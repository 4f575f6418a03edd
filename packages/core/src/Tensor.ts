/**
 * Strided n-dimensional views over a Storage. Views (view, slice, select, transpose, ...) share
 * their storage; `clone` and `contiguous` of a strided view copy. Element ops run on the CPU only.
 *
 * Values cross the JS boundary as numbers: 64-bit integers beyond 2^53 lose precision in `get`,
 * `item`, `toArray` and `sum` (use `typedArray()` for exact BigInt64Array / BigUint64Array access);
 * writing accepts numbers or bigints. float16, bfloat16 and float8 elements are bit patterns
 * converted exactly (see DType.ts); bool elements are 0/1.
 */
import type { Allocator, Storage } from "./Allocator.js"
import { currentAllocator } from "./AllocatorScope.js"
import { cpuAllocator } from "./CpuMemory.js"
import { parseDevice, type Device } from "./Device.js"
import { DTypes, dtypeOf, type DType, type DTypeInfo, type StorageArray } from "./DType.js"
import { DeviceError, DTypeError, ShapeError } from "./Errors.js"
import { decoder, elementArray, encoder, isBigIntDType, type RawArray } from "./internal/elements.js"
import {
  checkIndex,
  checkInteger,
  checkShape,
  contiguousStrides,
  describe,
  forEachIndex,
  forEachPair,
  isContiguousLayout,
  lastElementIndex,
  MAX_DIMS,
  normalizeDim,
  numelOf,
} from "./internal/layout.js"
import { normalSampler } from "./internal/prng.js"

// Symbol.for so that isTensor recognizes tensors made by a duplicated copy of this module.
const TENSOR_BRAND: unique symbol = Symbol.for("tensorlane.Tensor") as never
const INSPECT = Symbol.for("nodejs.util.inspect.custom")
/** Elements from which a contiguous fill stores whole 64-bit words. */
const LARGE_FILL = 1 << 16

export interface TensorOptions {
  /** Default "float32". */
  readonly dtype?: DType
  /** Default: the allocator's device, else "cpu". */
  readonly device?: Device
  /** Default: `currentAllocator(device)`. */
  readonly allocator?: Allocator
}

export interface RandnOptions extends TensorOptions {
  /** Same seed, same values (any number; every bit counts). Without one, a random seed. */
  readonly seed?: number
}

export interface FromStorageOptions {
  readonly dtype: DType
  readonly shape: ReadonlyArray<number>
  /** In elements; default row-major contiguous. */
  readonly strides?: ReadonlyArray<number>
  /** In elements; default 0. */
  readonly offset?: number
}

export interface AllcloseOptions {
  readonly rtol?: number
  readonly atol?: number
}

export interface ToOptions {
  /** Allocator of the destination; default `currentAllocator(device)`. */
  readonly allocator?: Allocator
}

export type NestedArray<T> = ReadonlyArray<T | NestedArray<T>>

export type NumericTypedArray = StorageArray | Uint8ClampedArray

/** Input of `Tensor.from`: a scalar, (nested) arrays of numbers or of bigints, or a typed array. */
export type TensorData = number | bigint | NestedArray<number> | NestedArray<bigint> | NumericTypedArray

const TYPED_ARRAY_DTYPES: ReadonlyArray<readonly [Function, DType]> = [
  [Float64Array, "float64"],
  [Float32Array, "float32"],
  [Int8Array, "int8"],
  [Int16Array, "int16"],
  [Int32Array, "int32"],
  [BigInt64Array, "int64"],
  [Uint8Array, "uint8"],
  [Uint8ClampedArray, "uint8"],
  [Uint16Array, "uint16"],
  [Uint32Array, "uint32"],
  [BigUint64Array, "uint64"],
]

/** Significant digits shown by toString, about what each float format resolves. */
const DISPLAY_DIGITS: Partial<Record<DType, number>> = {
  float32: 8,
  float16: 5,
  bfloat16: 4,
  float8_e4m3fn: 3,
  float8_e5m2: 3,
}
const DISPLAY_VALUES = 6

export const isTensor = (x: unknown): x is Tensor =>
  typeof x === "object" && x !== null && (x as { [TENSOR_BRAND]?: unknown })[TENSOR_BRAND] === true

const resolveOptions = (opts: TensorOptions | undefined): { dtype: DType; device: Device; allocator: Allocator } => {
  const dtype = dtypeOf(opts?.dtype ?? "float32").name
  const allocator = opts?.allocator
  const device = parseDevice(opts?.device ?? allocator?.device ?? "cpu")
  if (allocator === undefined) return { dtype, device, allocator: currentAllocator(device) }
  if (allocator.device !== device) {
    throw new DeviceError({
      message: `allocator "${allocator.name}" allocates on ${allocator.device}, not on the requested ${device}`,
      device,
    })
  }
  return { dtype, device, allocator }
}

const byteLengthOf = (shape: ReadonlyArray<number>, info: DTypeInfo): number => {
  const n = numelOf(shape) * info.itemSize
  if (!Number.isSafeInteger(n)) {
    throw new ShapeError({ message: `shape ${describe(shape)} of ${info.name} has more than 2^53 - 1 bytes` })
  }
  return n
}

/** Shape of `view`/`reshape`: at most one -1, inferred from the element count. */
const inferShape = (shape: unknown, numel: number): Array<number> => {
  if (!Array.isArray(shape)) throw new ShapeError({ message: `shape must be an array, got ${describe(shape)}` })
  const inferred = shape.indexOf(-1)
  if (inferred !== shape.lastIndexOf(-1)) {
    throw new ShapeError({ message: `only one dimension can be -1 in ${describe(shape)}` })
  }
  const known = checkShape(shape.map((d, i) => (i === inferred ? 1 : d)))
  const product = numelOf(known)
  if (inferred >= 0) {
    if (product === 0 || numel % product !== 0) {
      throw new ShapeError({ message: `cannot infer the -1 of ${describe(shape)} for ${numel} elements` })
    }
    known[inferred] = numel / product
  } else if (product !== numel) {
    throw new ShapeError({ message: `shape ${describe(shape)} has ${product} elements, the tensor has ${numel}` })
  }
  return known
}

/** Python slice bound: negative counts from the end, then clamped to [0, size]. */
const clampBound = (i: number, size: number): number => (i < 0 ? Math.max(i + size, 0) : Math.min(i, size))

const flattenNested = (
  data: NestedArray<number | bigint>,
): { shape: Array<number>; values: Array<number | bigint> } => {
  const shape: Array<number> = []
  // Bounded so that a self-containing array ends in a ShapeError rather than an endless loop.
  for (let level: unknown = data; Array.isArray(level) && shape.length <= MAX_DIMS; level = level[0]) {
    shape.push(level.length)
  }
  checkShape(shape)
  const values: Array<number | bigint> = []
  const walk = (node: unknown, depth: number): void => {
    if (depth === shape.length) {
      if (typeof node !== "number" && typeof node !== "bigint") {
        throw new DTypeError({ message: `tensor data must hold numbers or bigints, got ${typeof node}` })
      }
      values.push(node)
      return
    }
    if (!Array.isArray(node) || node.length !== shape[depth]) {
      throw new ShapeError({
        message: `ragged tensor data: expected ${shape[depth]} elements at depth ${depth}, got ${Array.isArray(node) ? node.length : "a scalar"}`,
      })
    }
    for (const child of node) walk(child, depth + 1)
  }
  walk(data, 0)
  return { shape, values }
}

export class Tensor {
  readonly [TENSOR_BRAND] = true as const
  readonly dtype: DType
  readonly shape: ReadonlyArray<number>
  /** In elements. */
  readonly strides: ReadonlyArray<number>
  /** Index of the first element in the storage, in elements. */
  readonly offset: number
  readonly storage: Storage
  readonly numel: number

  private constructor(
    storage: Storage,
    dtype: DType,
    shape: ReadonlyArray<number>,
    strides: ReadonlyArray<number>,
    offset: number,
  ) {
    this.storage = storage
    this.dtype = dtype
    this.shape = Object.freeze([...shape])
    this.strides = Object.freeze([...strides])
    this.offset = offset
    this.numel = numelOf(shape)
  }

  get device(): Device {
    return this.storage.device
  }

  get ndim(): number {
    return this.shape.length
  }

  get nbytes(): number {
    return this.numel * DTypes[this.dtype].itemSize
  }

  /** Offset of the first element in the storage, in bytes. */
  get byteOffset(): number {
    return this.offset * DTypes[this.dtype].itemSize
  }

  isContiguous(): boolean {
    return isContiguousLayout(this.shape, this.strides)
  }

  // ---- factories ----

  /** Uninitialized: zeros in fresh memory, arbitrary bytes in recycled memory (large default CPU storages, pool blocks). */
  static empty(shape: ReadonlyArray<number>, opts?: TensorOptions): Tensor {
    const { dtype, allocator } = resolveOptions(opts)
    return Tensor.allocate(checkShape(shape), dtype, allocator)
  }

  static zeros(shape: ReadonlyArray<number>, opts?: TensorOptions): Tensor {
    return Tensor.full(shape, 0, opts)
  }

  static ones(shape: ReadonlyArray<number>, opts?: TensorOptions): Tensor {
    return Tensor.full(shape, 1, opts)
  }

  static full(shape: ReadonlyArray<number>, value: number | bigint, opts?: TensorOptions): Tensor {
    return Tensor.build(checkShape(shape), opts, (t) => t.fill_(value))
  }

  /** `arange(end)` or `arange(start, end, step = 1)`: start + i * step while below (above, for step < 0) end. */
  static arange(end: number, opts?: TensorOptions): Tensor
  static arange(start: number, end: number, step?: number, opts?: TensorOptions): Tensor
  static arange(a: number, b?: number | TensorOptions, c?: number, d?: TensorOptions): Tensor {
    const [start, end, step, opts] = typeof b === "number" ? [a, b, c ?? 1, d] : [0, a, 1, b]
    for (const [what, v] of [["start", start], ["end", end], ["step", step]] as const) {
      if (typeof v !== "number" || !Number.isFinite(v)) {
        throw new ShapeError({ message: `arange ${what} must be a finite number, got ${describe(v)}` })
      }
    }
    if (step === 0) throw new ShapeError({ message: "arange step must not be 0" })
    const length = checkShape([Math.max(0, Math.ceil((end - start) / step))])
    return Tensor.build(length, opts, (t) => {
      const enc = encoder(t.dtype)
      const out = t.elements()
      for (let i = 0; i < length[0]; i++) out[i] = enc(start + i * step)
    })
  }

  /** Standard normal samples (xoshiro128** + Box-Muller); float dtypes only. */
  static randn(shape: ReadonlyArray<number>, opts?: RandnOptions): Tensor {
    const dims = checkShape(shape)
    const dtype = dtypeOf(opts?.dtype ?? "float32")
    if (dtype.kind !== "float") throw new DTypeError({ message: `randn needs a float dtype, got ${dtype.name}` })
    const sample = normalSampler(opts?.seed)
    return Tensor.build(dims, opts, (t) => {
      const enc = encoder(t.dtype)
      const out = t.elements()
      for (let i = 0; i < t.numel; i++) out[i] = enc(sample())
    })
  }

  /**
   * A new tensor holding a copy of `data`. The dtype defaults to the typed array's (uint8 for
   * Uint8Array, ...), int64 for bigint data, else float32. Typed array input is 1-d.
   */
  static from(data: TensorData, opts?: TensorOptions): Tensor {
    if (ArrayBuffer.isView(data)) {
      const inferred = TYPED_ARRAY_DTYPES.find(([ctor]) => data instanceof ctor)
      if (inferred === undefined) {
        throw new DTypeError({ message: `cannot make a tensor from a ${data.constructor.name}` })
      }
      const source = data as NumericTypedArray
      const dtype = opts?.dtype ?? inferred[1]
      return Tensor.build([source.length], { ...opts, dtype }, (t) => {
        if (dtype === inferred[1]) {
          t.storage.bytes.set(new Uint8Array(source.buffer, source.byteOffset, source.byteLength))
        } else {
          const enc = encoder(dtype)
          const out = t.elements()
          for (let i = 0; i < source.length; i++) out[i] = enc(source[i])
        }
      })
    }
    if (typeof data === "number" || typeof data === "bigint") {
      const dtype = opts?.dtype ?? (typeof data === "bigint" ? "int64" : "float32")
      return Tensor.full([], data, { ...opts, dtype })
    }
    const { shape, values } = flattenNested(data)
    const dtype = opts?.dtype ?? (values.length > 0 && values.every((v) => typeof v === "bigint") ? "int64" : "float32")
    return Tensor.build(shape, { ...opts, dtype }, (t) => {
      const enc = encoder(dtype)
      const out = t.elements()
      values.forEach((v, i) => (out[i] = enc(v)))
    })
  }

  /**
   * A view over existing storage, typically memory received from a peer: dtype, shape, strides
   * and offset are all validated, and the view must lie inside the storage (ShapeError otherwise).
   */
  static fromStorage(storage: Storage, opts: FromStorageOptions): Tensor {
    const info = dtypeOf(opts.dtype)
    const shape = checkShape(opts.shape)
    const byteLength = checkIndex(storage.byteLength, "storage byteLength")
    let strides = contiguousStrides(shape)
    if (opts.strides !== undefined) {
      if (!Array.isArray(opts.strides) || opts.strides.length !== shape.length) {
        throw new ShapeError({ message: `strides ${describe(opts.strides)} do not match shape ${describe(shape)}` })
      }
      strides = opts.strides.map((s, i) => checkIndex(s, `stride ${i}`))
    }
    const offset = checkIndex(opts.offset ?? 0, "offset")
    byteLengthOf(shape, info)
    const capacity = Math.floor(byteLength / info.itemSize)
    const last = lastElementIndex(shape, strides, offset)
    if (last >= capacity || offset > capacity) {
      throw new ShapeError({
        message: `view with shape ${describe(shape)}, strides ${describe(strides)} and offset ${offset} of ${info.name} does not fit in storage of ${byteLength} bytes`,
      })
    }
    return new Tensor(storage, info.name, shape, strides, offset)
  }

  private static allocate(shape: ReadonlyArray<number>, dtype: DType, allocator: Allocator): Tensor {
    const storage = allocator.allocate(byteLengthOf(shape, DTypes[dtype]))
    return new Tensor(storage, dtype, shape, contiguousStrides(shape), 0)
  }

  /** Fills a new contiguous host tensor with `init`, then moves it to the requested device. */
  private static build(
    shape: ReadonlyArray<number>,
    opts: TensorOptions | undefined,
    init: (t: Tensor) => void,
  ): Tensor {
    const { dtype, device, allocator } = resolveOptions(opts)
    const t = Tensor.allocate(shape, dtype, device === "cpu" ? allocator : cpuAllocator)
    init(t)
    return device === "cpu" ? t : t.transfer(device, allocator)
  }

  // ---- views ----

  /** Same storage, new shape; the tensor must be contiguous (use reshape otherwise). One -1 is inferred. */
  view(shape: ReadonlyArray<number>): Tensor {
    const dims = inferShape(shape, this.numel)
    if (!this.isContiguous()) {
      throw new ShapeError({
        message: `view of a non-contiguous tensor (shape ${describe(this.shape)}, strides ${describe(this.strides)}): use reshape`,
      })
    }
    return new Tensor(this.storage, this.dtype, dims, contiguousStrides(dims), this.offset)
  }

  /** Like view, but copies when the tensor is not contiguous. */
  reshape(shape: ReadonlyArray<number>): Tensor {
    return this.isContiguous() ? this.view(shape) : this.contiguous().view(shape)
  }

  /** Python's `[start:end:step]` along `dim` (negative indices count from the end; step > 0). */
  slice(dim: number, start = 0, end?: number, step = 1): Tensor {
    const d = normalizeDim(dim, this.ndim)
    const size = this.shape[d]
    const s = clampBound(checkInteger(start, "slice start"), size)
    const e = clampBound(end === undefined ? size : checkInteger(end, "slice end"), size)
    if (checkInteger(step, "slice step") <= 0) {
      throw new ShapeError({ message: `slice step must be positive, got ${step}` })
    }
    const shape = [...this.shape]
    const strides = [...this.strides]
    shape[d] = e > s ? Math.ceil((e - s) / step) : 0
    strides[d] *= step
    return new Tensor(this.storage, this.dtype, shape, strides, this.offset + s * this.strides[d])
  }

  /** The sub-tensor at `index` along `dim`, which is removed. */
  select(dim: number, index: number): Tensor {
    const d = normalizeDim(dim, this.ndim)
    const i = this.checkPosition(index, d)
    const shape = this.shape.filter((_, k) => k !== d)
    const strides = this.strides.filter((_, k) => k !== d)
    return new Tensor(this.storage, this.dtype, shape, strides, this.offset + i * this.strides[d])
  }

  row(i: number): Tensor {
    return this.select(0, i)
  }

  transpose(dim0: number, dim1: number): Tensor {
    const a = normalizeDim(dim0, this.ndim)
    const b = normalizeDim(dim1, this.ndim)
    const shape = [...this.shape]
    const strides = [...this.strides]
    ;[shape[a], shape[b]] = [shape[b], shape[a]]
    ;[strides[a], strides[b]] = [strides[b], strides[a]]
    return new Tensor(this.storage, this.dtype, shape, strides, this.offset)
  }

  flatten(): Tensor {
    return this.reshape([this.numel])
  }

  // ---- copies ----

  /** This tensor when contiguous, else a contiguous copy (CPU only: gathering needs a kernel). */
  contiguous(): Tensor {
    if (this.isContiguous()) return this
    this.requireHost("contiguous")
    return this.clone()
  }

  /** A copy in new storage from the current allocator of the device (contiguous on the CPU). */
  clone(): Tensor {
    if (this.device !== "cpu") return this.transfer(this.device, currentAllocator(this.device))
    const out = Tensor.allocate(this.shape, this.dtype, currentAllocator("cpu"))
    if (this.isContiguous()) {
      out.storage.bytes.set(this.storage.bytes.subarray(this.byteOffset, this.byteOffset + this.nbytes))
    } else {
      const src = this.elements()
      const dst = out.elements()
      let k = 0
      forEachIndex(this.shape, this.strides, this.offset, (i) => (dst[k++] = src[i]))
    }
    return out
  }

  /** This tensor on `device`: itself when already there, else a copy through the allocators' `copy`. */
  to(device: Device, opts?: ToOptions): Tensor {
    const d = parseDevice(device)
    if (d === this.device) return this
    return this.transfer(d, opts?.allocator ?? currentAllocator(d))
  }

  /**
   * Copies into new storage of `allocator`. Host tensors are made contiguous first; device tensors
   * (which cannot be gathered here) are copied as the byte span they cover, keeping their strides.
   */
  private transfer(device: Device, allocator: Allocator): Tensor {
    if (allocator.device !== device) {
      throw new DeviceError({
        message: `allocator "${allocator.name}" allocates on ${allocator.device}, not ${device}`,
        device,
      })
    }
    const src = this.device === "cpu" ? this.contiguous() : this
    const itemSize = DTypes[this.dtype].itemSize
    const last = lastElementIndex(src.shape, src.strides, src.offset)
    const byteLength = last < 0 ? 0 : (last - src.offset + 1) * itemSize
    const storage = allocator.allocate(byteLength)
    if (byteLength > 0) {
      // The native side owns the copy: prefer the allocator that is not the host one.
      const candidates = src.device === "cpu" ? [allocator, src.storage.allocator] : [src.storage.allocator, allocator]
      const copier = candidates.find((a) => a.copy !== undefined)
      if (copier?.copy === undefined) {
        allocator.free(storage)
        throw new DeviceError({
          message: `cannot copy from ${src.device} to ${device}: neither allocator "${src.storage.allocator.name}" nor "${allocator.name}" provides copy`,
          device: src.device === "cpu" ? device : src.device,
        })
      }
      copier.copy(src.storage, src.byteOffset, storage, 0, byteLength)
    }
    return new Tensor(storage, this.dtype, src.shape, src.strides, 0)
  }

  // ---- element ops (CPU) ----

  fill_(value: number | bigint): this {
    const raw = encoder(this.dtype)(value)
    const data = this.elements()
    if (!this.isContiguous()) {
      forEachIndex(this.shape, this.strides, this.offset, (i) => (data[i] = raw))
    } else if (this.numel < LARGE_FILL) {
      data.fill(raw, this.offset, this.offset + this.numel)
    } else {
      // Over shared memory a typed-array fill stores one element at a time (relaxed atomics), so it
      // goes as fast as its elements are wide: one element's bytes repeated into 64-bit words fill fastest.
      const info = DTypes[this.dtype]
      const word = new Uint8Array(8)
      elementArray(word, info).fill(raw)
      const bytes = this.storage.bytes
      const start = bytes.byteOffset + this.byteOffset
      const head = Math.min(this.numel, ((8 - (start % 8)) % 8) / info.itemSize)
      const words = Math.floor(((this.numel - head) * info.itemSize) / 8)
      const tail = head + (words * 8) / info.itemSize
      data.fill(raw, this.offset, this.offset + head)
      new BigUint64Array(bytes.buffer, start + head * info.itemSize, words).fill(new BigUint64Array(word.buffer)[0]!)
      data.fill(raw, this.offset + tail, this.offset + this.numel)
    }
    return this
  }

  /** In place `this += other` for a tensor of the same shape and dtype, or a scalar. */
  add_(other: Tensor | number | bigint): this {
    const data = this.elements()
    const info = DTypes[this.dtype]
    const dec = decoder(this.dtype)
    const enc = encoder(this.dtype)
    if (!isTensor(other)) {
      if ((info.kind === "int" || info.kind === "uint") && typeof other === "number" && !Number.isInteger(other)) {
        throw new DTypeError({ message: `cannot add the non-integer ${other} to a ${this.dtype} tensor` })
      }
      if (isBigIntDType(this.dtype)) {
        const s = BigInt(other)
        forEachIndex(this.shape, this.strides, this.offset, (i) => (data[i] = (data[i] as bigint) + s))
      } else {
        const s = Number(other)
        forEachIndex(this.shape, this.strides, this.offset, (i) => (data[i] = enc(dec(data[i]) + s)))
      }
      return this
    }
    if (other.dtype !== this.dtype) {
      throw new DTypeError({ message: `cannot add a ${other.dtype} tensor to a ${this.dtype} tensor` })
    }
    this.checkSameShape(other, "add_")
    const src = other.elements()
    const combine = isBigIntDType(this.dtype)
      ? (i: number, j: number) => (data[i] = (data[i] as bigint) + (src[j] as bigint))
      : (i: number, j: number) => (data[i] = enc(dec(data[i]) + dec(src[j])))
    forEachPair(this.shape, this.strides, this.offset, other.strides, other.offset, combine)
    return this
  }

  /** Sum of all elements as a number (float64 accumulation; exact BigInt accumulation for 64-bit ints). */
  sum(): number {
    const data = this.elements()
    if (isBigIntDType(this.dtype)) {
      let total = 0n
      forEachIndex(this.shape, this.strides, this.offset, (i) => (total += data[i] as bigint))
      return Number(total)
    }
    const dec = decoder(this.dtype)
    let total = 0
    forEachIndex(this.shape, this.strides, this.offset, (i) => (total += dec(data[i])))
    return total
  }

  /**
   * Whether |a - b| <= atol + rtol * |b| elementwise (NaN is never close). Shapes must match;
   * dtypes may differ since values are compared as numbers.
   */
  allclose(other: Tensor, opts?: AllcloseOptions): boolean {
    return Tensor.allclose(this, other, opts)
  }

  static allclose(a: Tensor, b: Tensor, opts?: AllcloseOptions): boolean {
    const rtol = opts?.rtol ?? 1e-5
    const atol = opts?.atol ?? 1e-8
    a.checkSameShape(b, "allclose")
    const da = a.elements()
    const db = b.elements()
    const decA = decoder(a.dtype)
    const decB = decoder(b.dtype)
    let close = true
    forEachPair(a.shape, a.strides, a.offset, b.strides, b.offset, (i, j) => {
      const x = decA(da[i])
      const y = decB(db[j])
      // Infinities are close only to themselves (the tolerance would be infinite too).
      if (x !== y && !(Number.isFinite(x - y) && Math.abs(x - y) <= atol + rtol * Math.abs(y))) close = false
    })
    return close
  }

  /** Same dtype, same shape and equal elements (NaN differs from everything, -0 equals 0). */
  equal(other: Tensor): boolean {
    if (other.dtype !== this.dtype || other.ndim !== this.ndim || other.shape.some((d, i) => d !== this.shape[i])) {
      return false
    }
    const a = this.elements()
    const b = other.elements()
    const dec = isBigIntDType(this.dtype) ? (r: number | bigint) => r : decoder(this.dtype)
    let equal = true
    forEachPair(this.shape, this.strides, this.offset, other.strides, other.offset, (i, j) => {
      if (dec(a[i]) !== dec(b[j])) equal = false
    })
    return equal
  }

  /** All elements in logical (row-major) order, as numbers. */
  toArray(): Array<number> {
    const data = this.elements()
    const dec = decoder(this.dtype)
    const out: Array<number> = []
    forEachIndex(this.shape, this.strides, this.offset, (i) => out.push(dec(data[i])))
    return out
  }

  /** The value of a one-element tensor. */
  item(): number {
    const data = this.elements()
    if (this.numel !== 1) {
      throw new ShapeError({ message: `item() needs exactly one element, the tensor has ${this.numel}` })
    }
    return decoder(this.dtype)(data[this.storageIndex(new Array(this.ndim).fill(0))])
  }

  /** The element at `indices` (one per dimension; negative counts from the end). */
  get(...indices: Array<number>): number {
    return decoder(this.dtype)(this.elements()[this.storageIndex(indices)])
  }

  set(indices: ReadonlyArray<number>, value: number | bigint): this {
    this.elements()[this.storageIndex(indices)] = encoder(this.dtype)(value)
    return this
  }

  /** The bytes of the elements in logical order: a view without copying when contiguous, else a copy. */
  contiguousBytes(): Uint8Array {
    this.requireHost("contiguousBytes")
    const t = this.contiguous()
    return t.storage.bytes.subarray(t.byteOffset, t.byteOffset + t.nbytes)
  }

  /** A typed array view (the dtype's storage class, bit patterns for the narrow floats) of a contiguous host tensor. */
  typedArray(): StorageArray {
    this.requireHost("typedArray")
    if (!this.isContiguous()) {
      throw new ShapeError({ message: "typedArray() needs a contiguous tensor: call contiguous() first" })
    }
    return elementArray(this.storage.bytes, DTypes[this.dtype], this.offset, this.numel) as unknown as StorageArray
  }

  toString(): string {
    const head = `Tensor(${this.dtype}, ${describe(this.shape)}, ${this.device})`
    if (this.device !== "cpu") return head
    let values: string
    try {
      values = this.formatValues()
    } catch (e) {
      values = `<${e instanceof Error ? e.message : String(e)}>`
    }
    return `${head} ${values}`
  }

  [INSPECT](): string {
    return this.toString()
  }

  // ---- helpers ----

  /** A typed array over the whole storage, for host tensors; DeviceError naming the device otherwise. */
  private elements(): RawArray {
    this.requireHost("element access")
    return elementArray(this.storage.bytes, DTypes[this.dtype])
  }

  private requireHost(op: string): void {
    if (this.device !== "cpu") {
      throw new DeviceError({
        message: `${op} runs on the CPU only; this tensor is on ${this.device}: copy it with .to("cpu") first`,
        device: this.device,
      })
    }
  }

  private checkSameShape(other: Tensor, op: string): void {
    if (other.ndim !== this.ndim || other.shape.some((d, i) => d !== this.shape[i])) {
      throw new ShapeError({ message: `${op}: shapes ${describe(this.shape)} and ${describe(other.shape)} differ` })
    }
  }

  private checkPosition(index: number, dim: number): number {
    const size = this.shape[dim]
    const i = checkInteger(index, `index for dim ${dim}`)
    const p = i < 0 ? i + size : i
    if (p < 0 || p >= size) {
      throw new ShapeError({ message: `index ${i} is out of range for dim ${dim} of size ${size}` })
    }
    return p
  }

  private storageIndex(indices: ReadonlyArray<number>): number {
    if (!Array.isArray(indices) || indices.length !== this.ndim) {
      throw new ShapeError({ message: `expected ${this.ndim} indices for shape ${describe(this.shape)}, got ${describe(indices)}` })
    }
    return indices.reduce((at: number, index, d) => at + this.checkPosition(index, d) * this.strides[d], this.offset)
  }

  private formatValues(): string {
    const count = Math.min(this.numel, DISPLAY_VALUES)
    const data = this.elements()
    const digits = DISPLAY_DIGITS[this.dtype]
    const dec = decoder(this.dtype)
    const shown: Array<string> = []
    for (let k = 0; k < count; k++) {
      // Unravel the logical position k into per-dim indices.
      const indices = new Array<number>(this.ndim)
      for (let d = this.ndim - 1, rest = k; d >= 0; d--) {
        indices[d] = rest % this.shape[d]
        rest = Math.floor(rest / this.shape[d])
      }
      const raw = data[this.storageIndex(indices)]
      const v = isBigIntDType(this.dtype) ? raw : dec(raw)
      shown.push(typeof v === "number" && digits !== undefined ? String(Number(v.toPrecision(digits))) : String(v))
    }
    return `[${shown.join(", ")}${this.numel > count ? ", ..." : ""}]`
  }
}
