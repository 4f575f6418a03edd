/**
 * Shapes and strides: validation strict enough for metadata received from peers, the strided walk in
 * logical (row-major) order that every CPU op uses, and the layouts of a tensor's views.
 */
import type { DTypeInfo } from "../DType.js"
import { ShapeError } from "../Errors.js"

/** More dimensions than this is treated as hostile input (NumPy's limit). */
export const MAX_DIMS = 64

/** Shapes and scalars as they appear in error messages. */
export const describe = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(describe).join(", ")}]`
  return typeof v === "string" ? JSON.stringify(v) : String(v)
}

const fail = (message: string): never => {
  throw new ShapeError({ message })
}

/** A non-negative safe integer, or ShapeError naming `what`. */
export const checkIndex = (v: unknown, what: string): number => {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    return fail(`${what} must be a non-negative integer, got ${describe(v)}`)
  }
  return v
}

/** A safe integer (negative allowed), or ShapeError naming `what`. */
export const checkInteger = (v: unknown, what: string): number => {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) return fail(`${what} must be an integer, got ${describe(v)}`)
  return v
}

/** Validates and copies a shape: at most MAX_DIMS non-negative integers whose product is a safe integer. */
export const checkShape = (shape: unknown): Array<number> => {
  if (!Array.isArray(shape)) return fail(`shape must be an array of non-negative integers, got ${describe(shape)}`)
  if (shape.length > MAX_DIMS) return fail(`shape has ${shape.length} dimensions; at most ${MAX_DIMS} are supported`)
  let product = 1
  const out = shape.map((d: unknown, i) => {
    const size = checkIndex(d, `dimension ${i} of shape ${describe(shape)}`)
    // Zero-sized dims are skipped so that [2**40, 2**40, 0] is still rejected: its strides would overflow.
    if (size !== 0) product *= size
    return size
  })
  if (product > Number.MAX_SAFE_INTEGER) return fail(`shape ${describe(shape)} has more than 2^53 - 1 elements`)
  return out
}

/** Elements of a shape (1 for a scalar's []). */
export const numelOf = (shape: ReadonlyArray<number>): number => shape.reduce((a, b) => a * b, 1)

/** Row-major strides; zero-sized dims count as 1 so strides stay meaningful (as in PyTorch). */
export const contiguousStrides = (shape: ReadonlyArray<number>): Array<number> => {
  const strides = new Array<number>(shape.length)
  let stride = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = stride
    stride *= Math.max(shape[i], 1)
  }
  return strides
}

export const isContiguousLayout = (shape: ReadonlyArray<number>, strides: ReadonlyArray<number>): boolean => {
  let expected = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 0) return true
    if (shape[i] !== 1 && strides[i] !== expected) return false
    expected *= shape[i]
  }
  return true
}

/**
 * The largest element index a non-empty view touches, checking every step against 2^53 so that
 * hostile strides cannot wrap around into a small number. -1 for an empty view.
 */
export const lastElementIndex = (
  shape: ReadonlyArray<number>,
  strides: ReadonlyArray<number>,
  offset: number,
): number => {
  if (shape.includes(0)) return -1
  let last = offset
  for (let i = 0; i < shape.length; i++) {
    const span = (shape[i] - 1) * strides[i]
    last += span
    if (!Number.isSafeInteger(span) || !Number.isSafeInteger(last)) {
      return fail(`view with shape ${describe(shape)}, strides ${describe(strides)} and offset ${offset} overflows`)
    }
  }
  return last
}

/** A dimension index, negative counting from the end as in Python. */
export const normalizeDim = (dim: unknown, ndim: number): number => {
  const d = checkInteger(dim, "dim")
  const n = d < 0 ? d + ndim : d
  if (n < 0 || n >= ndim) return fail(`dim ${d} is out of range for a tensor with ${ndim} dimensions`)
  return n
}

/**
 * Calls `fn` with the element indices of two views of one shape, in logical (row-major) order.
 * Walks like an odometer so no index list is materialized.
 */
export const forEachPair = (
  shape: ReadonlyArray<number>,
  stridesA: ReadonlyArray<number>,
  offsetA: number,
  stridesB: ReadonlyArray<number>,
  offsetB: number,
  fn: (a: number, b: number) => void,
): void => {
  const total = numelOf(shape)
  if (total === 0) return
  const n = shape.length
  if (n === 0) {
    fn(offsetA, offsetB)
    return
  }
  const last = n - 1
  const size = shape[last]
  const sa = stridesA[last]
  const sb = stridesB[last]
  const counter = new Array<number>(n).fill(0)
  let rowA = offsetA
  let rowB = offsetB
  for (let done = 0; done < total; done += size) {
    for (let j = 0; j < size; j++) fn(rowA + j * sa, rowB + j * sb)
    for (let d = last - 1; d >= 0; d--) {
      counter[d]++
      rowA += stridesA[d]
      rowB += stridesB[d]
      if (counter[d] < shape[d]) break
      rowA -= stridesA[d] * shape[d]
      rowB -= stridesB[d] * shape[d]
      counter[d] = 0
    }
  }
}

export const forEachIndex = (
  shape: ReadonlyArray<number>,
  strides: ReadonlyArray<number>,
  offset: number,
  fn: (index: number) => void,
): void => forEachPair(shape, strides, offset, strides, offset, fn)

/** Shape of `view`/`reshape`: at most one -1, inferred from the element count. */
export const inferShape = (shape: unknown, numel: number): Array<number> => {
  if (!Array.isArray(shape)) return fail(`shape must be an array, got ${describe(shape)}`)
  const inferred = shape.indexOf(-1)
  if (inferred !== shape.lastIndexOf(-1)) return fail(`only one dimension can be -1 in ${describe(shape)}`)
  const known = checkShape(shape.map((d, i) => (i === inferred ? 1 : d)))
  const product = numelOf(known)
  if (inferred >= 0) {
    if (product === 0 || numel % product !== 0) return fail(`cannot infer the -1 of ${describe(shape)} for ${numel} elements`)
    known[inferred] = numel / product
  } else if (product !== numel) {
    return fail(`shape ${describe(shape)} has ${product} elements, the tensor has ${numel}`)
  }
  return known
}

/** Python slice bound: negative counts from the end, then clamped to [0, size]. */
export const clampBound = (i: number, size: number): number => (i < 0 ? Math.max(i + size, 0) : Math.min(i, size))

/** Bytes of a contiguous tensor of `shape`; ShapeError past 2^53 - 1. */
export const byteLengthOf = (shape: ReadonlyArray<number>, info: DTypeInfo): number => {
  const n = numelOf(shape) * info.itemSize
  if (!Number.isSafeInteger(n)) return fail(`shape ${describe(shape)} of ${info.name} has more than 2^53 - 1 bytes`)
  return n
}

/** Where a view lies in its storage: its dimensions, their strides and its first element, in elements. */
export interface ViewLayout {
  readonly shape: ReadonlyArray<number>
  readonly strides: ReadonlyArray<number>
  readonly offset: number
}

/**
 * The layout of a view over `byteLength` bytes of storage (typically memory received from a peer):
 * shape, strides and offset validated, and every element inside the storage.
 */
export const viewInStorage = (
  requested: { readonly shape: unknown; readonly strides?: unknown; readonly offset?: unknown },
  info: DTypeInfo,
  storageBytes: unknown,
): ViewLayout => {
  const shape = checkShape(requested.shape)
  const byteLength = checkIndex(storageBytes, "storage byteLength")
  let strides = contiguousStrides(shape)
  if (requested.strides !== undefined) {
    if (!Array.isArray(requested.strides) || requested.strides.length !== shape.length) {
      return fail(`strides ${describe(requested.strides)} do not match shape ${describe(shape)}`)
    }
    strides = requested.strides.map((s: unknown, i) => checkIndex(s, `stride ${i}`))
  }
  const offset = checkIndex(requested.offset ?? 0, "offset")
  byteLengthOf(shape, info)
  const capacity = Math.floor(byteLength / info.itemSize)
  const last = lastElementIndex(shape, strides, offset)
  if (last >= capacity || offset > capacity) {
    return fail(
      `view with shape ${describe(shape)}, strides ${describe(strides)} and offset ${offset} of ${info.name} does not fit in storage of ${byteLength} bytes`,
    )
  }
  return { shape, strides, offset }
}

/** An index along a dimension of `size` (negative counts from the end), or ShapeError. */
export const checkPosition = (index: number, dim: number, size: number): number => {
  const i = checkInteger(index, `index for dim ${dim}`)
  const p = i < 0 ? i + size : i
  if (p < 0 || p >= size) return fail(`index ${i} is out of range for dim ${dim} of size ${size}`)
  return p
}

/** The storage index of the element at `indices`, one per dimension. */
export const storageIndexOf = (view: ViewLayout, indices: ReadonlyArray<number>): number => {
  if (!Array.isArray(indices) || indices.length !== view.shape.length) {
    return fail(`expected ${view.shape.length} indices for shape ${describe(view.shape)}, got ${describe(indices)}`)
  }
  return indices.reduce((at: number, index, d) => at + checkPosition(index, d, view.shape[d]) * view.strides[d], view.offset)
}

/** The view `[start:end:step]` along `dim` (negative indices count from the end; step > 0). */
export const sliceView = (view: ViewLayout, dim: number, start: number, end: number | undefined, step: number): ViewLayout => {
  const d = normalizeDim(dim, view.shape.length)
  const size = view.shape[d]
  const s = clampBound(checkInteger(start, "slice start"), size)
  const e = clampBound(end === undefined ? size : checkInteger(end, "slice end"), size)
  if (checkInteger(step, "slice step") <= 0) return fail(`slice step must be positive, got ${step}`)
  const shape = [...view.shape]
  const strides = [...view.strides]
  shape[d] = e > s ? Math.ceil((e - s) / step) : 0
  strides[d] *= step
  return { shape, strides, offset: view.offset + s * view.strides[d] }
}

/** The view at `index` along `dim`, which is removed. */
export const selectView = (view: ViewLayout, dim: number, index: number): ViewLayout => {
  const d = normalizeDim(dim, view.shape.length)
  const i = checkPosition(index, d, view.shape[d])
  return { shape: view.shape.filter((_, k) => k !== d), strides: view.strides.filter((_, k) => k !== d), offset: view.offset + i * view.strides[d] }
}

/** The view with dimensions `dim0` and `dim1` swapped. */
export const transposeView = (view: ViewLayout, dim0: number, dim1: number): ViewLayout => {
  const a = normalizeDim(dim0, view.shape.length)
  const b = normalizeDim(dim1, view.shape.length)
  const shape = [...view.shape]
  const strides = [...view.strides]
  ;[shape[a], shape[b]] = [shape[b], shape[a]]
  ;[strides[a], strides[b]] = [strides[b], strides[a]]
  return { shape, strides, offset: view.offset }
}
