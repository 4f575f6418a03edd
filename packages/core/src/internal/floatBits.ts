/**
 * Exact conversions between JS numbers (float64) and the bit patterns of the narrow float formats.
 * Encoding rounds once, directly from float64, to nearest with ties to even (no double rounding
 * through float32).
 */

interface MiniFloat {
  readonly manBits: number
  readonly bias: number
  readonly signBit: number
  /** Pattern (without sign) for overflow and ±Infinity; the NaN pattern for formats without infinities. */
  readonly overflow: number
  readonly nan: number
  readonly maxFinite: number
  readonly minNormal: number
  /** Spacing of subnormals: 2^(1 - bias - manBits). */
  readonly minSubnormal: number
}

const miniFloat = (
  expBits: number,
  manBits: number,
  maxFinite: number,
  overflow: number,
  nan: number,
): MiniFloat => {
  const bias = 2 ** (expBits - 1) - 1
  return {
    manBits,
    bias,
    signBit: 2 ** (expBits + manBits),
    overflow,
    nan,
    maxFinite,
    minNormal: 2 ** (1 - bias),
    minSubnormal: 2 ** (1 - bias - manBits),
  }
}

const FLOAT16 = miniFloat(5, 10, 65504, 0x7c00, 0x7e00)
const BFLOAT16 = miniFloat(8, 7, (2 - 2 ** -7) * 2 ** 127, 0x7f80, 0x7fc0)
// e4m3fn has no infinities: the all-ones pattern is NaN, so overflow (and ±Infinity) becomes NaN.
const FLOAT8_E4M3FN = miniFloat(4, 3, 448, 0x7f, 0x7f)
const FLOAT8_E5M2 = miniFloat(5, 2, 57344, 0x7c, 0x7f)

const f64 = new Float64Array(1)
const u32 = new Uint32Array(f64.buffer)
const HIGH_WORD = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0

/** floor(log2(a)) for a positive normal double, read from its exponent field (Math.log2 is inexact). */
const exponentOf = (a: number): number => {
  f64[0] = a
  return ((u32[HIGH_WORD] >>> 20) & 0x7ff) - 1023
}

const roundHalfEven = (v: number): number => {
  const n = Math.floor(v)
  const d = v - n
  return d > 0.5 || (d === 0.5 && n % 2 === 1) ? n + 1 : n
}

const encode = (x: number, f: MiniFloat): number => {
  if (x !== x) return f.nan
  const sign = x < 0 || Object.is(x, -0) ? f.signBit : 0
  const a = Math.abs(x)
  if (a === Infinity) return sign | f.overflow
  // Quantum (ulp) of the target format at a's magnitude; dividing and multiplying by a power of two is exact.
  const quantum = a < f.minNormal ? f.minSubnormal : 2 ** (exponentOf(a) - f.manBits)
  const r = roundHalfEven(a / quantum) * quantum
  if (r > f.maxFinite) return sign | f.overflow
  if (r < f.minNormal) return sign | (r / f.minSubnormal)
  const e = exponentOf(r)
  return sign | ((e + f.bias) << f.manBits) | (r / 2 ** (e - f.manBits) - 2 ** f.manBits)
}

const decode = (bits: number, f: MiniFloat, hasInfinity: boolean): number => {
  const sign = bits & f.signBit ? -1 : 1
  const magnitude = bits & (f.signBit - 1)
  const manMask = 2 ** f.manBits - 1
  const e = magnitude >>> f.manBits
  const m = magnitude & manMask
  if (hasInfinity) {
    if (magnitude === f.overflow) return sign * Infinity
    if (magnitude > f.overflow) return NaN
  } else if (magnitude === f.nan) {
    return NaN
  }
  if (e === 0) return sign * m * f.minSubnormal
  return sign * (1 + m / (manMask + 1)) * 2 ** (e - f.bias)
}

const table = (f: MiniFloat, hasInfinity: boolean, size: number): Float64Array => {
  const t = new Float64Array(size)
  for (let i = 0; i < size; i++) t[i] = decode(i, f, hasInfinity)
  return t
}

// Decoding is a table lookup: 256 entries for fp8, 65536 (512 KiB, built on first use) for float16.
const E4M3FN_VALUES = table(FLOAT8_E4M3FN, false, 256)
const E5M2_VALUES = table(FLOAT8_E5M2, true, 256)
let float16Values: Float64Array | undefined

export const float16BitsToNumber = (bits: number): number =>
  (float16Values ??= table(FLOAT16, true, 65536))[bits & 0xffff]

export const numberToFloat16Bits = (x: number): number => encode(x, FLOAT16)

const f32 = new Float32Array(1)
const f32Bits = new Uint32Array(f32.buffer)

/** bfloat16 is the high half of a float32, so decoding is exact through a float32 view. */
export const bfloat16BitsToNumber = (bits: number): number => {
  f32Bits[0] = (bits & 0xffff) << 16
  return f32[0]
}

export const numberToBfloat16Bits = (x: number): number => encode(x, BFLOAT16)

export const float8E4M3fnBitsToNumber = (bits: number): number => E4M3FN_VALUES[bits & 0xff]

export const numberToFloat8E4M3fnBits = (x: number): number => encode(x, FLOAT8_E4M3FN)

export const float8E5M2BitsToNumber = (bits: number): number => E5M2_VALUES[bits & 0xff]

export const numberToFloat8E5M2Bits = (x: number): number => encode(x, FLOAT8_E5M2)
