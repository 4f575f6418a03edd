/**
 * Element types of tensors and how their elements are held in JS memory.
 *
 * float16, bfloat16 and the float8 formats have no native JS arrays: their elements are stored as
 * bit patterns (Uint16Array / Uint8Array) and converted exactly with the functions below.
 *
 * float8 conversions follow PyTorch, which implements the non-saturating mode of the OCP 8-bit
 * floating point specification (v1.0): round to nearest even, then a result beyond the largest
 * finite value becomes NaN for e4m3fn (it has no infinities; 464 still rounds down to 448, anything
 * above becomes NaN) and ±Infinity for e5m2 (|x| >= 61440). ±Infinity becomes NaN for e4m3fn.
 * Saturation (clamping to ±448) is left to callers that want it, since it silently hides overflow.
 */
import { DTypeError } from "./Errors.js"

export {
  bfloat16BitsToNumber,
  float16BitsToNumber,
  float8E4M3fnBitsToNumber,
  float8E5M2BitsToNumber,
  numberToBfloat16Bits,
  numberToFloat16Bits,
  numberToFloat8E4M3fnBits,
  numberToFloat8E5M2Bits,
} from "./internal/floatBits.js"

export type DType =
  | "float64"
  | "float32"
  | "float16"
  | "bfloat16"
  | "float8_e4m3fn"
  | "float8_e5m2"
  | "int8"
  | "int16"
  | "int32"
  | "int64"
  | "uint8"
  | "uint16"
  | "uint32"
  | "uint64"
  | "bool"

export type DTypeKind = "float" | "int" | "uint" | "bool"

/** The typed arrays that hold tensor elements. */
export type StorageArray =
  | Float64Array
  | Float32Array
  | Int8Array
  | Int16Array
  | Int32Array
  | BigInt64Array
  | Uint8Array
  | Uint16Array
  | Uint32Array
  | BigUint64Array

export type StorageArrayConstructor =
  | Float64ArrayConstructor
  | Float32ArrayConstructor
  | Int8ArrayConstructor
  | Int16ArrayConstructor
  | Int32ArrayConstructor
  | BigInt64ArrayConstructor
  | Uint8ArrayConstructor
  | Uint16ArrayConstructor
  | Uint32ArrayConstructor
  | BigUint64ArrayConstructor

export interface DTypeInfo {
  readonly name: DType
  /** Bytes per element. */
  readonly itemSize: 1 | 2 | 4 | 8
  readonly kind: DTypeKind
  /** The typed array class that holds the elements (bit patterns for the narrow floats, 0/1 for bool). */
  readonly array: StorageArrayConstructor
  /** Whether `array` holds bit patterns that need the conversion functions rather than values. */
  readonly bitPattern: boolean
}

const info = <D extends DType>(
  name: D,
  itemSize: DTypeInfo["itemSize"],
  kind: DTypeKind,
  array: StorageArrayConstructor,
  bitPattern = false,
): DTypeInfo & { readonly name: D } => Object.freeze({ name, itemSize, kind, array, bitPattern })

export const DTypes: { readonly [D in DType]: DTypeInfo & { readonly name: D } } = Object.freeze({
  float64: info("float64", 8, "float", Float64Array),
  float32: info("float32", 4, "float", Float32Array),
  float16: info("float16", 2, "float", Uint16Array, true),
  bfloat16: info("bfloat16", 2, "float", Uint16Array, true),
  float8_e4m3fn: info("float8_e4m3fn", 1, "float", Uint8Array, true),
  float8_e5m2: info("float8_e5m2", 1, "float", Uint8Array, true),
  int8: info("int8", 1, "int", Int8Array),
  int16: info("int16", 2, "int", Int16Array),
  int32: info("int32", 4, "int", Int32Array),
  int64: info("int64", 8, "int", BigInt64Array),
  uint8: info("uint8", 1, "uint", Uint8Array),
  uint16: info("uint16", 2, "uint", Uint16Array),
  uint32: info("uint32", 4, "uint", Uint32Array),
  uint64: info("uint64", 8, "uint", BigUint64Array),
  bool: info("bool", 1, "bool", Uint8Array),
})

/** Every dtype name, in the order of `DTypes`. */
export const dtypeNames: ReadonlyArray<DType> = Object.freeze(Object.keys(DTypes) as Array<DType>)

export const isDType = (x: unknown): x is DType => typeof x === "string" && Object.hasOwn(DTypes, x)

/** The table entry of a dtype name; DTypeError listing the valid names for anything else. */
export const dtypeOf = (name: unknown): DTypeInfo => {
  if (isDType(name)) return DTypes[name]
  const shown = typeof name === "string" ? JSON.stringify(name) : String(name)
  throw new DTypeError({ message: `unknown dtype ${shown}: expected one of ${dtypeNames.join(", ")}` })
}
