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
import { DTypes, dtypeOf, type DType, type StorageArray } from "./DType.js"
import { DeviceError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedOperationError } from "./Errors.js"
import { checkOptions, describe as describeValue } from "./internal/arguments.js"
import {
  addElements,
  addScalar,
  closeElements,
  elementsToArray,
  equalElements,
  fillElements,
  fillWith,
  formatElements,
  sumElements,
} from "./internal/elementOps.js"
import { decoder, elementArray, encoder, isBigIntDType, type RawArray } from "./internal/elements.js"
import {
  byteLengthOf,
  checkShape,
  contiguousStrides,
  describe,
  forEachIndex,
  inferShape,
  isContiguousLayout,
  lastElementIndex,
  numelOf,
  selectView,
  sliceView,
  storageIndexOf,
  transposeView,
  type ViewLayout,
  viewInStorage,
} from "./internal/layout.js"
import { normalSampler } from "./internal/prng.js"
import { type TensorData, readArrayInput } from "./internal/tensorInput.js"
import { copyToAllocator, tensorOptions } from "./internal/tensorStorage.js"

export type { NestedArray, NumericTypedArray, TensorData } from "./internal/tensorInput.js"

// Symbol.for so that isTensor recognizes tensors made by a duplicated copy of this module.
const TENSOR_BRAND: unique symbol = Symbol.for("tensorlane.Tensor") as never
const INSPECT = Symbol.for("nodejs.util.inspect.custom")

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

/** A scalar operand of `op`: a number or a bigint. */
const checkScalar = (value: unknown, op: string): number | bigint => {
  if (typeof value !== "number" && typeof value !== "bigint") {
    throw new InvalidArgumentError({ message: `${op} takes a number or a bigint, not ${describeValue(value)}`, argument: "value" })
  }
  return value
}

/** A tensor operand of `op`, its argument named `argument`. */
const requireTensor = (value: unknown, op: string, argument = "other"): Tensor => {
  if (!isTensor(value)) throw new InvalidArgumentError({ message: `${op} takes a tensor, not ${describeValue(value)}`, argument })
  return value
}

export const isTensor = (x: unknown): x is Tensor =>
  typeof x === "object" && x !== null && (x as { [TENSOR_BRAND]?: unknown })[TENSOR_BRAND] === true

/** The unsigned integer dtype of each element size, to copy elements bit for bit. */
const UNSIGNED_OF_SIZE: Readonly<Record<number, DType>> = { 1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64" }

/** Whether two tensors' elements lie in a common stretch of one storage's memory. */
const overlaps = (a: Tensor, b: Tensor): boolean => {
  if (a.storage !== b.storage || a.numel === 0 || b.numel === 0) return false
  return a.offset <= lastElementIndex(b.shape, b.strides, b.offset) && b.offset <= lastElementIndex(a.shape, a.strides, a.offset)
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
    const { dtype, allocator } = tensorOptions(opts)
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
      // 64-bit integers from whole numbers count exactly, past 2^53 too; as doubles they would repeat there.
      const exact = isBigIntDType(t.dtype) && Number.isInteger(start) && Number.isInteger(step)
      const [first, by] = [BigInt(exact ? start : 0), BigInt(exact ? step : 0)]
      fillWith(t.elements(), t.dtype, t.numel, exact ? (i) => first + BigInt(i) * by : (i) => start + i * step)
    })
  }

  /** Standard normal samples (xoshiro128** + Box-Muller); float dtypes only. */
  static randn(shape: ReadonlyArray<number>, opts?: RandnOptions): Tensor {
    const dims = checkShape(shape)
    const dtype = dtypeOf(opts?.dtype ?? "float32")
    if (dtype.kind !== "float") throw new DTypeError({ message: `randn needs a float dtype, got ${dtype.name}` })
    if (opts?.seed !== undefined && typeof opts.seed !== "number") {
      throw new InvalidArgumentError({ message: `randn's seed is a number, not ${describeValue(opts.seed)}`, argument: "seed" })
    }
    const sample = normalSampler(opts?.seed)
    return Tensor.build(dims, opts, (t) => fillWith(t.elements(), t.dtype, t.numel, sample))
  }

  /**
   * A new tensor holding a copy of `data`. The dtype defaults to the typed array's (uint8 for
   * Uint8Array, ...), int64 for bigint data, else float32. Typed array input is 1-d.
   */
  static from(data: TensorData, opts?: TensorOptions): Tensor {
    if (typeof data === "number" || typeof data === "bigint") {
      const dtype = opts?.dtype ?? (typeof data === "bigint" ? "int64" : "float32")
      return Tensor.full([], data, { ...opts, dtype })
    }
    const input = readArrayInput(data, opts?.dtype)
    return Tensor.build(input.shape, { ...opts, dtype: input.dtype }, (t) => input.write(t.elements(), t.storage.bytes))
  }

  /**
   * A view over existing storage, typically memory received from a peer: dtype, shape, strides
   * and offset are all validated, and the view must lie inside the storage (ShapeError otherwise).
   */
  static fromStorage(storage: Storage, opts: FromStorageOptions): Tensor {
    const { device, byteLength } = (storage ?? {}) as Partial<Storage>
    if (typeof device !== "string" || typeof byteLength !== "number") {
      throw new InvalidArgumentError({ message: `fromStorage takes a Storage (an allocator's, or a tensor's .storage), not ${describeValue(storage)}`, argument: "storage" })
    }
    if (typeof opts !== "object" || opts === null) {
      throw new InvalidArgumentError({ message: `fromStorage needs options with at least a dtype, not ${describeValue(opts)}`, argument: "opts" })
    }
    const info = dtypeOf(opts.dtype)
    return Tensor.over(storage, info.name, viewInStorage(opts, info, storage.byteLength))
  }

  /** A view of `layout` over `storage`. */
  private static over(storage: Storage, dtype: DType, layout: ViewLayout): Tensor {
    return new Tensor(storage, dtype, layout.shape, layout.strides, layout.offset)
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
    const { dtype, device, allocator } = tensorOptions(opts)
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
    return Tensor.over(this.storage, this.dtype, sliceView(this, dim, start, end, step))
  }

  /** The sub-tensor at `index` along `dim`, which is removed. */
  select(dim: number, index: number): Tensor {
    return Tensor.over(this.storage, this.dtype, selectView(this, dim, index))
  }

  row(i: number): Tensor {
    return this.select(0, i)
  }

  transpose(dim0: number, dim1: number): Tensor {
    return Tensor.over(this.storage, this.dtype, transposeView(this, dim0, dim1))
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
      // Copied as unsigned integers of the element's size: through a Float32Array a signalling NaN
      // comes out quiet, its bits changed.
      const bits = DTypes[UNSIGNED_OF_SIZE[DTypes[this.dtype].itemSize]!]
      const src = elementArray(this.storage.bytes, bits)
      const dst = elementArray(out.storage.bytes, bits)
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
    const src = this.device === "cpu" ? this.contiguous() : this
    const last = lastElementIndex(src.shape, src.strides, src.offset)
    const byteLength = last < 0 ? 0 : (last - src.offset + 1) * DTypes[this.dtype].itemSize
    const storage = copyToAllocator(src.storage, src.byteOffset, byteLength, device, allocator)
    return new Tensor(storage, this.dtype, src.shape, src.strides, 0)
  }

  // ---- element ops (CPU) ----

  fill_(value: number | bigint): this {
    checkScalar(value, "fill_")
    fillElements(this, this.elements(), this.storage.bytes, value)
    return this
  }

  /** In place `this += other` for a tensor of the same shape and dtype, or a scalar. */
  add_(other: Tensor | number | bigint): this {
    if (this.shape.some((n, d) => n > 1 && this.strides[d] === 0)) {
      throw new UnsupportedOperationError({
        message: "add_ writes to a tensor whose elements share memory (a zero stride): each would be added to more than once; add to t.contiguous() instead",
      })
    }
    const data = this.elements()
    if (!isTensor(other)) {
      addScalar(this, data, checkScalar(other, "add_"))
      return this
    }
    if (other.dtype !== this.dtype) {
      throw new DTypeError({ message: `cannot add a ${other.dtype} tensor to a ${this.dtype} tensor` })
    }
    this.checkSameShape(other, "add_")
    // An operand over memory this tensor writes, other than element for element, is read from a copy
    // taken first: read as the sum goes, it would give elements already summed.
    const sameView = other.storage === this.storage && other.offset === this.offset && other.strides.every((st, d) => st === this.strides[d])
    const src = !sameView && overlaps(this, other) ? other.clone() : other
    addElements(this, data, src, src.elements())
    return this
  }

  /** Sum of all elements as a number (float64 accumulation; exact BigInt accumulation for 64-bit ints). */
  sum(): number {
    return sumElements(this, this.elements())
  }

  /**
   * Whether |a - b| <= atol + rtol * |b| elementwise (NaN is never close). Shapes must match;
   * dtypes may differ since values are compared as numbers.
   */
  allclose(other: Tensor, opts?: AllcloseOptions): boolean {
    return Tensor.allclose(this, other, opts)
  }

  static allclose(a: Tensor, b: Tensor, opts?: AllcloseOptions): boolean {
    requireTensor(a, "allclose", "a")
    a.checkSameShape(requireTensor(b, "allclose", "b"), "allclose")
    const { rtol = 1e-5, atol = 1e-8 } = checkOptions(opts, "allclose options")
    for (const [argument, tolerance] of [["rtol", rtol], ["atol", atol]] as const) {
      if (typeof tolerance !== "number" || !(tolerance >= 0)) {
        throw new InvalidArgumentError({ message: `allclose's ${argument} must be a number >= 0, not ${describeValue(tolerance)}`, argument })
      }
    }
    return closeElements(a, a.elements(), b, b.elements(), rtol, atol)
  }

  /** Same dtype, same shape and equal elements (NaN differs from everything, -0 equals 0). */
  equal(other: Tensor): boolean {
    requireTensor(other, "equal")
    if (other.dtype !== this.dtype || other.ndim !== this.ndim || other.shape.some((d, i) => d !== this.shape[i])) {
      return false
    }
    return equalElements(this, this.elements(), other, other.elements())
  }

  /** All elements in logical (row-major) order, as numbers. */
  toArray(): Array<number> {
    return elementsToArray(this, this.elements())
  }

  /** The value of a one-element tensor. */
  item(): number {
    const data = this.elements()
    if (this.numel !== 1) {
      throw new ShapeError({ message: `item() needs exactly one element, the tensor has ${this.numel}` })
    }
    return decoder(this.dtype)(data[storageIndexOf(this, new Array(this.ndim).fill(0))])
  }

  /** The element at `indices` (one per dimension; negative counts from the end). */
  get(...indices: Array<number>): number {
    return decoder(this.dtype)(this.elements()[storageIndexOf(this, indices)])
  }

  set(indices: ReadonlyArray<number>, value: number | bigint): this {
    this.elements()[storageIndexOf(this, indices)] = encoder(this.dtype)(checkScalar(value, "set"))
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
      values = formatElements(this, this.elements())
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
}
