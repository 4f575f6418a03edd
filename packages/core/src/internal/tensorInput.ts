/** What `Tensor.from` takes: nested arrays of numbers or bigints, or a typed array, and how it reads them. */
import type { DType, StorageArray } from "../DType.js"
import { DTypeError, ShapeError } from "../Errors.js"
import { type RawArray, encoder } from "./elements.js"
import { MAX_DIMS, checkShape } from "./layout.js"

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

/** Array input, read: its shape, its dtype, and how it writes itself into a new contiguous host tensor. */
export interface ArrayInput {
  readonly shape: ReadonlyArray<number>
  readonly dtype: DType
  /** Writes the values into `out`, the elements of the new tensor, whose memory is `bytes`. */
  readonly write: (out: RawArray, bytes: Uint8Array) => void
}

const flattenNested = (data: NestedArray<number | bigint>): { shape: Array<number>; values: Array<number | bigint> } => {
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

/**
 * Reads array input: a typed array (1-d; its dtype by default, uint8 for Uint8Array, ...) or nested
 * arrays (int64 by default for bigints, else float32); `dtype` overrides the default.
 */
export const readArrayInput = (data: NestedArray<number> | NestedArray<bigint> | NumericTypedArray, dtype: DType | undefined): ArrayInput => {
  if (ArrayBuffer.isView(data)) {
    const inferred = TYPED_ARRAY_DTYPES.find(([ctor]) => data instanceof ctor)
    if (inferred === undefined) {
      throw new DTypeError({ message: `cannot make a tensor from a ${(data as object).constructor.name}` })
    }
    const source = data as NumericTypedArray
    const target = dtype ?? inferred[1]
    return {
      shape: [source.length],
      dtype: target,
      write: (out, bytes) => {
        if (target === inferred[1]) {
          bytes.set(new Uint8Array(source.buffer, source.byteOffset, source.byteLength))
        } else {
          const enc = encoder(target)
          for (let i = 0; i < source.length; i++) out[i] = enc(source[i])
        }
      },
    }
  }
  const { shape, values } = flattenNested(data)
  const target = dtype ?? (values.length > 0 && values.every((v) => typeof v === "bigint") ? "int64" : "float32")
  return {
    shape,
    dtype: target,
    write: (out) => {
      const enc = encoder(target)
      values.forEach((v, i) => (out[i] = enc(v)))
    },
  }
}
