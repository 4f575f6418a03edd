/**
 * The element operations of host tensors (Tensor's `fill_`, `add_`, `sum`, `allclose`, `equal`,
 * `toArray`, `toString` and the factories' fills), over a tensor's layout and the typed array of its
 * whole storage.
 */
import { Buffer } from "node:buffer"
import { DTypes, type DType } from "../DType.js"
import { DTypeError } from "../Errors.js"
import { type RawArray, decoder, elementArray, encoder, isBigIntDType, wrapBigInt } from "./elements.js"
import { forEachIndex, forEachPair, isContiguousLayout } from "./layout.js"

/** A host tensor as the operations read it (a Tensor is one), with `data`, the typed array of its whole storage. */
export interface HostElements {
  readonly dtype: DType
  readonly shape: ReadonlyArray<number>
  /** In elements. */
  readonly strides: ReadonlyArray<number>
  /** In elements. */
  readonly offset: number
  readonly numel: number
}

/** Elements from which a contiguous fill goes through Buffer.fill. */
const LARGE_FILL = 1 << 16

/** Significant digits shown by toString, about what each float format resolves. */
const DISPLAY_DIGITS: Partial<Record<DType, number>> = {
  float32: 8,
  float16: 5,
  bfloat16: 4,
  float8_e4m3fn: 3,
  float8_e5m2: 3,
}
const DISPLAY_VALUES = 6

/** Sets every element of `t` to `value`; `bytes` is its storage's memory, which `data` views. */
export const fillElements = (t: HostElements, data: RawArray, bytes: Uint8Array, value: number | bigint): void => {
  const raw = encoder(t.dtype)(value)
  if (!isContiguousLayout(t.shape, t.strides)) {
    forEachIndex(t.shape, t.strides, t.offset, (i) => (data[i] = raw))
  } else if (t.numel < LARGE_FILL) {
    data.fill(raw, t.offset, t.offset + t.numel)
  } else {
    // Over shared memory a typed-array fill stores one element at a time (relaxed atomics); Node's
    // Buffer.fill repeats an array's bytes with memcpy, as fast as the memory takes them (given a
    // number, it fills as a typed array does: one byte at a time).
    const info = DTypes[t.dtype]
    const element = new Uint8Array(info.itemSize)
    elementArray(element, info).fill(raw)
    const target = Buffer.from(bytes.buffer, bytes.byteOffset + t.offset * info.itemSize, t.numel * info.itemSize)
    target.fill(element)
  }
}

/** In place `t += scalar`. */
export const addScalar = (t: HostElements, data: RawArray, scalar: number | bigint): void => {
  const info = DTypes[t.dtype]
  if ((info.kind === "int" || info.kind === "uint") && typeof scalar === "number" && !Number.isInteger(scalar)) {
    throw new DTypeError({ message: `cannot add the non-integer ${scalar} to a ${t.dtype} tensor` })
  }
  if (isBigIntDType(t.dtype)) {
    const s = BigInt(scalar)
    forEachIndex(t.shape, t.strides, t.offset, (i) => (data[i] = (data[i] as bigint) + s))
  } else {
    const dec = decoder(t.dtype)
    const enc = encoder(t.dtype)
    // Adding the scalar modulo 2^bits wraps alike.
    const s = typeof scalar === "bigint" && (info.kind === "int" || info.kind === "uint") ? wrapBigInt(scalar, 8 * info.itemSize, info.kind === "int") : Number(scalar)
    forEachIndex(t.shape, t.strides, t.offset, (i) => (data[i] = enc(dec(data[i]) + s)))
  }
}

/** In place `t += other`, for a tensor of the same shape and dtype. */
export const addElements = (t: HostElements, data: RawArray, other: HostElements, src: RawArray): void => {
  const dec = decoder(t.dtype)
  const enc = encoder(t.dtype)
  const combine = isBigIntDType(t.dtype)
    ? (i: number, j: number) => (data[i] = (data[i] as bigint) + (src[j] as bigint))
    : (i: number, j: number) => (data[i] = enc(dec(data[i]) + dec(src[j])))
  forEachPair(t.shape, t.strides, t.offset, other.strides, other.offset, combine)
}

/** Sum of all elements as a number (float64 accumulation; exact BigInt accumulation for 64-bit ints). */
export const sumElements = (t: HostElements, data: RawArray): number => {
  if (isBigIntDType(t.dtype)) {
    let total = 0n
    forEachIndex(t.shape, t.strides, t.offset, (i) => (total += data[i] as bigint))
    return Number(total)
  }
  const dec = decoder(t.dtype)
  let total = 0
  forEachIndex(t.shape, t.strides, t.offset, (i) => (total += dec(data[i])))
  return total
}

/** Whether |a - b| <= atol + rtol * |b| elementwise, for tensors of the same shape (NaN is never close). */
export const closeElements = (a: HostElements, da: RawArray, b: HostElements, db: RawArray, rtol: number, atol: number): boolean => {
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

/** Whether the elements are equal, for tensors of the same shape and dtype (NaN differs from everything, -0 equals 0). */
export const equalElements = (a: HostElements, da: RawArray, b: HostElements, db: RawArray): boolean => {
  const dec = isBigIntDType(a.dtype) ? (r: number | bigint) => r : decoder(a.dtype)
  let equal = true
  forEachPair(a.shape, a.strides, a.offset, b.strides, b.offset, (i, j) => {
    if (dec(da[i]) !== dec(db[j])) equal = false
  })
  return equal
}

/** All elements in logical (row-major) order, as numbers. */
export const elementsToArray = (t: HostElements, data: RawArray): Array<number> => {
  const dec = decoder(t.dtype)
  const out: Array<number> = []
  forEachIndex(t.shape, t.strides, t.offset, (i) => out.push(dec(data[i])))
  return out
}

/** The first few elements, as toString shows them: `[1, 2, 3, ...]`. */
export const formatElements = (t: HostElements, data: RawArray): string => {
  const count = Math.min(t.numel, DISPLAY_VALUES)
  const digits = DISPLAY_DIGITS[t.dtype]
  const dec = decoder(t.dtype)
  const shown: Array<string> = []
  for (let k = 0; k < count; k++) {
    // Unravel the logical position k into the storage index.
    let at = t.offset
    for (let d = t.shape.length - 1, rest = k; d >= 0; d--) {
      at += (rest % t.shape[d]) * t.strides[d]
      rest = Math.floor(rest / t.shape[d])
    }
    const v = isBigIntDType(t.dtype) ? data[at] : dec(data[at])
    shown.push(typeof v === "number" && digits !== undefined ? String(Number(v.toPrecision(digits))) : String(v))
  }
  return `[${shown.join(", ")}${t.numel > count ? ", ..." : ""}]`
}

/** Fills the `out` elements of a new contiguous tensor of `dtype` with `value(i)`, for i from 0 to `numel`. */
export const fillWith = (out: RawArray, dtype: DType, numel: number, value: (i: number) => number | bigint): void => {
  const enc = encoder(dtype)
  for (let i = 0; i < numel; i++) out[i] = enc(value(i))
}
