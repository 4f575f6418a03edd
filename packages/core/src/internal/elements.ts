/**
 * Reading and writing tensor elements: typed array views over storage bytes, and the per-dtype
 * conversions between JS values and stored raw elements (bit patterns for the narrow floats).
 */
import type { DType, DTypeInfo } from "../DType.js"
import { ShapeError } from "../Errors.js"
import {
  bfloat16BitsToNumber,
  float16BitsToNumber,
  float8E4M3fnBitsToNumber,
  float8E5M2BitsToNumber,
  numberToBfloat16Bits,
  numberToFloat16Bits,
  numberToFloat8E4M3fnBits,
  numberToFloat8E5M2Bits,
} from "./floatBits.js"

/** A stored element as its typed array holds it. */
export type Raw = number | bigint

/** The typed arrays seen through one signature: each array accepts exactly the raws its encoder makes. */
export interface RawArray {
  [index: number]: Raw
  readonly length: number
  fill(value: Raw, start?: number, end?: number): unknown
}

/** A typed array of the dtype's storage class over `bytes`, from element `start` (default: all whole elements). */
export const elementArray = (
  bytes: Uint8Array,
  info: DTypeInfo,
  start = 0,
  length = Math.floor(bytes.byteLength / info.itemSize) - start,
): RawArray => {
  if (bytes.byteOffset % info.itemSize !== 0) {
    throw new ShapeError({
      message: `storage bytes start at byte ${bytes.byteOffset} of their buffer, not aligned for ${info.name} (${info.itemSize} bytes)`,
    })
  }
  const View = info.array as unknown as new (buffer: ArrayBufferLike, byteOffset: number, length: number) => RawArray
  // An empty view may start past its storage's end (a slice along an empty dimension): it reads nothing.
  if (length === 0) return new View(bytes.buffer, bytes.byteOffset, 0)
  return new View(bytes.buffer, bytes.byteOffset + start * info.itemSize, length)
}

/** Truncates toward zero like the integer typed arrays; non-finite values become 0 as they do. */
const toBigInt = (v: number | bigint): bigint =>
  typeof v === "bigint" ? v : Number.isFinite(v) ? BigInt(Math.trunc(v)) : 0n

const num = (v: number | bigint): number => (typeof v === "bigint" ? Number(v) : v)

/**
 * A bigint as an integer of `bits` bits stores it, wrapped modulo 2^bits before it becomes a Number
 * (as a Number first it would round past 2^53, and wrap wrong).
 */
export const wrapBigInt = (v: bigint, bits: number, signed: boolean): number => Number(signed ? BigInt.asIntN(bits, v) : BigInt.asUintN(bits, v))

/** An integer of `bits` bits: a bigint wrapped here, a number left to the typed array. */
const wrapped =
  (bits: number, signed: boolean) =>
  (v: number | bigint): number =>
    typeof v === "bigint" ? wrapBigInt(v, bits, signed) : v

const ENCODERS: { readonly [D in DType]: (v: number | bigint) => Raw } = {
  float64: num,
  float32: num,
  float16: (v) => numberToFloat16Bits(num(v)),
  bfloat16: (v) => numberToBfloat16Bits(num(v)),
  float8_e4m3fn: (v) => numberToFloat8E4M3fnBits(num(v)),
  float8_e5m2: (v) => numberToFloat8E5M2Bits(num(v)),
  int8: wrapped(8, true),
  int16: wrapped(16, true),
  int32: wrapped(32, true),
  // BigInt64Array / BigUint64Array wrap the bigint modulo 2^64 on assignment.
  int64: toBigInt,
  uint8: wrapped(8, false),
  uint16: wrapped(16, false),
  uint32: wrapped(32, false),
  uint64: toBigInt,
  // Like C++ and PyTorch, anything non-zero (NaN included) is true.
  bool: (v) => (num(v) !== 0 ? 1 : 0),
}

const DECODERS: { readonly [D in DType]: (raw: Raw) => number } = {
  float64: Number,
  float32: Number,
  float16: (r) => float16BitsToNumber(r as number),
  bfloat16: (r) => bfloat16BitsToNumber(r as number),
  float8_e4m3fn: (r) => float8E4M3fnBitsToNumber(r as number),
  float8_e5m2: (r) => float8E5M2BitsToNumber(r as number),
  int8: Number,
  int16: Number,
  int32: Number,
  int64: Number,
  uint8: Number,
  uint16: Number,
  uint32: Number,
  uint64: Number,
  // Storage received from a peer may hold any byte: read every non-zero byte as true.
  bool: (r) => (r !== 0 ? 1 : 0),
}

/** Converts a JS value to the raw element of `dtype`; integer dtypes wrap like the typed arrays. */
export const encoder = (dtype: DType): ((v: number | bigint) => Raw) => ENCODERS[dtype]

/** Converts a raw element of `dtype` to a number (64-bit integers beyond 2^53 lose precision). */
export const decoder = (dtype: DType): ((raw: Raw) => number) => DECODERS[dtype]

/** Whether raws of this dtype are bigints. */
export const isBigIntDType = (dtype: DType): boolean => dtype === "int64" || dtype === "uint64"
