/**
 * Shapes and strides: validation strict enough for metadata received from peers, and the strided
 * walk in logical (row-major) order that every CPU op uses.
 */
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
