import { describe, expect, it } from "vitest"
import {
  DTypes,
  bfloat16BitsToNumber,
  dtypeNames,
  dtypeOf,
  float16BitsToNumber,
  float8E4M3fnBitsToNumber,
  float8E5M2BitsToNumber,
  isDType,
  numberToBfloat16Bits,
  numberToFloat16Bits,
  numberToFloat8E4M3fnBits,
  numberToFloat8E5M2Bits,
} from "../src/DType.js"
import { DTypeError } from "../src/Errors.js"
import { thrown } from "./helpers/errors.ts"

interface Format {
  readonly name: string
  readonly patterns: number
  readonly signBit: number
  readonly toNumber: (bits: number) => number
  readonly fromNumber: (x: number) => number
}

const FORMATS: ReadonlyArray<Format> = [
  { name: "float16", patterns: 65536, signBit: 0x8000, toNumber: float16BitsToNumber, fromNumber: numberToFloat16Bits },
  { name: "bfloat16", patterns: 65536, signBit: 0x8000, toNumber: bfloat16BitsToNumber, fromNumber: numberToBfloat16Bits },
  { name: "float8_e4m3fn", patterns: 256, signBit: 0x80, toNumber: float8E4M3fnBitsToNumber, fromNumber: numberToFloat8E4M3fnBits },
  { name: "float8_e5m2", patterns: 256, signBit: 0x80, toNumber: float8E5M2BitsToNumber, fromNumber: numberToFloat8E5M2Bits },
]

/** The next double above a positive finite x. */
const nextUp = (x: number): number => {
  const f = new Float64Array([x])
  const u = new BigUint64Array(f.buffer)
  u[0] += 1n
  return f[0]
}

const nextDown = (x: number): number => {
  const f = new Float64Array([x])
  const u = new BigUint64Array(f.buffer)
  u[0] -= 1n
  return f[0]
}

describe("DTypes table", () => {
  it("describes every dtype", () => {
    expect(dtypeNames).toEqual([
      "float64",
      "float32",
      "float16",
      "bfloat16",
      "float8_e4m3fn",
      "float8_e5m2",
      "int8",
      "int16",
      "int32",
      "int64",
      "uint8",
      "uint16",
      "uint32",
      "uint64",
      "bool",
    ])
    const summary = Object.fromEntries(
      dtypeNames.map((n) => [n, [DTypes[n].itemSize, DTypes[n].kind, DTypes[n].array.name, DTypes[n].bitPattern]]),
    )
    expect(summary).toEqual({
      float64: [8, "float", "Float64Array", false],
      float32: [4, "float", "Float32Array", false],
      float16: [2, "float", "Uint16Array", true],
      bfloat16: [2, "float", "Uint16Array", true],
      float8_e4m3fn: [1, "float", "Uint8Array", true],
      float8_e5m2: [1, "float", "Uint8Array", true],
      int8: [1, "int", "Int8Array", false],
      int16: [2, "int", "Int16Array", false],
      int32: [4, "int", "Int32Array", false],
      int64: [8, "int", "BigInt64Array", false],
      uint8: [1, "uint", "Uint8Array", false],
      uint16: [2, "uint", "Uint16Array", false],
      uint32: [4, "uint", "Uint32Array", false],
      uint64: [8, "uint", "BigUint64Array", false],
      bool: [1, "bool", "Uint8Array", false],
    })
    for (const n of dtypeNames) {
      expect(DTypes[n].name).toBe(n)
      expect(DTypes[n].array.BYTES_PER_ELEMENT).toBe(DTypes[n].itemSize)
    }
  })

  it("is frozen", () => {
    expect(Object.isFrozen(DTypes)).toBe(true)
    expect(Object.isFrozen(DTypes.float32)).toBe(true)
  })

  it("isDType recognizes only dtype names", () => {
    expect(isDType("bfloat16")).toBe(true)
    expect(isDType("float")).toBe(false)
    expect(isDType("toString")).toBe(false)
    expect(isDType(undefined)).toBe(false)
    expect(isDType(4)).toBe(false)
  })

  it("dtypeOf returns the entry or a DTypeError listing the valid names", () => {
    expect(dtypeOf("int16")).toBe(DTypes.int16)
    expect(() => dtypeOf("complex64")).toThrow(DTypeError)
    const e = thrown(() => dtypeOf("half"))
    expect(e).toBeInstanceOf(DTypeError)
    expect((e as DTypeError)._tag).toBe("DTypeError")
    expect((e as DTypeError).message).toContain('"half"')
    for (const n of dtypeNames) expect((e as DTypeError).message).toContain(n)
    expect(() => dtypeOf("__proto__")).toThrow(DTypeError)
    expect(() => dtypeOf(null)).toThrow(DTypeError)
  })
})

describe.each(FORMATS)("$name conversions", (f) => {
  // Mismatches are collected rather than asserted one by one: expect() per pattern is slow.
  it("every bit pattern decodes and re-encodes to itself (NaNs to a NaN)", () => {
    const mismatches: Array<number> = []
    for (let bits = 0; bits < f.patterns; bits++) {
      const v = f.toNumber(bits)
      const back = f.fromNumber(v)
      if (Number.isNaN(v) ? !Number.isNaN(f.toNumber(back)) : back !== bits) mismatches.push(bits)
    }
    expect(mismatches).toEqual([])
  })

  it("rounds to nearest, ties to even, at every pair of neighbouring finite values", () => {
    const positives: Array<number> = []
    for (let bits = 0; bits < f.signBit; bits++) {
      if (Number.isFinite(f.toNumber(bits))) positives.push(bits)
    }
    const mismatches: Array<string> = []
    for (let k = 0; k + 1 < positives.length; k++) {
      const lo = positives[k]
      const hi = positives[k + 1]
      const mid = (f.toNumber(lo) + f.toNumber(hi)) / 2
      const even = lo % 2 === 0 ? lo : hi
      const checks: ReadonlyArray<readonly [number, number]> = [
        [mid, even],
        [nextDown(mid), lo],
        [nextUp(mid), hi],
        [-mid, even | f.signBit],
      ]
      for (const [x, expected] of checks) {
        if (f.fromNumber(x) !== expected) mismatches.push(`${x} -> ${f.fromNumber(x)}, expected ${expected}`)
      }
    }
    expect(positives.length).toBeGreaterThan(100)
    expect(mismatches).toEqual([])
  })

  it("keeps the sign of zero", () => {
    expect(f.fromNumber(0)).toBe(0)
    expect(f.fromNumber(-0)).toBe(f.signBit)
    expect(Object.is(f.toNumber(f.signBit), -0)).toBe(true)
  })
})

describe("float16", () => {
  it("matches known bit patterns", () => {
    const cases: ReadonlyArray<readonly [number, number]> = [
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [1023 * 2 ** -24, 0x03ff], // largest subnormal
      [Infinity, 0x7c00],
      [-Infinity, 0xfc00],
      [1 / 3, 0x3555],
      [0.1, 0x2e66],
    ]
    for (const [x, bits] of cases) expect(numberToFloat16Bits(x)).toBe(bits)
    expect(float16BitsToNumber(0x3555)).toBe(0.333251953125)
    expect(float16BitsToNumber(0x2e66)).toBe(0.0999755859375)
  })

  it("rounds ties to even and overflows to infinity at 65520", () => {
    expect(numberToFloat16Bits(1 + 2 ** -11)).toBe(0x3c00)
    expect(numberToFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02)
    expect(numberToFloat16Bits(2 ** -25)).toBe(0) // half the smallest subnormal: tie to even 0
    expect(numberToFloat16Bits(nextUp(2 ** -25))).toBe(1)
    expect(numberToFloat16Bits(3 * 2 ** -25)).toBe(2)
    expect(numberToFloat16Bits(65519.99)).toBe(0x7bff)
    expect(numberToFloat16Bits(65520)).toBe(0x7c00)
    expect(numberToFloat16Bits(-1e10)).toBe(0xfc00)
    expect(numberToFloat16Bits(Number.MIN_VALUE)).toBe(0)
  })

  it("handles NaN", () => {
    expect(numberToFloat16Bits(NaN)).toBe(0x7e00)
    expect(float16BitsToNumber(0x7c01)).toBeNaN()
    expect(float16BitsToNumber(0xfe00)).toBeNaN()
    expect(float16BitsToNumber(0x7c00)).toBe(Infinity)
  })
})

describe("bfloat16", () => {
  it("matches known bit patterns", () => {
    expect(numberToBfloat16Bits(1)).toBe(0x3f80)
    expect(numberToBfloat16Bits(Math.PI)).toBe(0x4049)
    expect(bfloat16BitsToNumber(0x4049)).toBe(3.140625)
    expect(numberToBfloat16Bits(-2)).toBe(0xc000)
    expect(bfloat16BitsToNumber(0x7f7f)).toBe((2 - 2 ** -7) * 2 ** 127)
    expect(numberToBfloat16Bits(2 ** -133)).toBe(0x0001)
    expect(numberToBfloat16Bits(2 ** -126)).toBe(0x0080)
    expect(numberToBfloat16Bits(Infinity)).toBe(0x7f80)
    expect(numberToBfloat16Bits(-Infinity)).toBe(0xff80)
    expect(numberToBfloat16Bits(NaN)).toBe(0x7fc0)
    expect(bfloat16BitsToNumber(0x7f81)).toBeNaN()
  })

  it("rounds ties to even and overflows like float32 does", () => {
    expect(numberToBfloat16Bits(1 + 2 ** -8)).toBe(0x3f80)
    expect(numberToBfloat16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82)
    const maxPlusHalfUlp = (2 - 2 ** -8) * 2 ** 127
    expect(numberToBfloat16Bits(maxPlusHalfUlp)).toBe(0x7f80)
    expect(numberToBfloat16Bits(nextDown(maxPlusHalfUlp))).toBe(0x7f7f)
  })

  it("rounds once from float64 (no double rounding through float32)", () => {
    // Through float32 this would first become 1 + 2^-8 (a tie) and then round down to 0x3f80.
    expect(numberToBfloat16Bits(1 + 2 ** -8 + 2 ** -40)).toBe(0x3f81)
  })

  it("agrees with the float32 bit trick on float32 inputs", () => {
    const f32 = new Float32Array(1)
    const u32 = new Uint32Array(f32.buffer)
    let state = 12345
    const mismatches: Array<number> = []
    for (let i = 0; i < 100_000; i++) {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0
      u32[0] = state
      const x = f32[0]
      if (Number.isNaN(x)) continue
      const bits = u32[0]
      const expected = ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff
      if (numberToBfloat16Bits(x) !== expected) mismatches.push(bits)
    }
    expect(mismatches).toEqual([])
  })
})

describe("float8_e4m3fn (OCP non-saturating, as PyTorch)", () => {
  it("matches known bit patterns", () => {
    expect(numberToFloat8E4M3fnBits(1)).toBe(0x38)
    expect(numberToFloat8E4M3fnBits(-1)).toBe(0xb8)
    expect(numberToFloat8E4M3fnBits(448)).toBe(0x7e)
    expect(numberToFloat8E4M3fnBits(-448)).toBe(0xfe)
    expect(float8E4M3fnBitsToNumber(0x78)).toBe(256) // exponent 15 is a normal binade: no infinities
    expect(numberToFloat8E4M3fnBits(2 ** -6)).toBe(0x08)
    expect(numberToFloat8E4M3fnBits(2 ** -9)).toBe(0x01)
    expect(float8E4M3fnBitsToNumber(0x07)).toBe(7 * 2 ** -9)
    expect(numberToFloat8E4M3fnBits(2 ** -10)).toBe(0x00) // tie to even
    expect(numberToFloat8E4M3fnBits(3 * 2 ** -10)).toBe(0x02)
  })

  it("has NaN = 0x7f/0xff and turns overflow and infinities into NaN", () => {
    expect(float8E4M3fnBitsToNumber(0x7f)).toBeNaN()
    expect(float8E4M3fnBitsToNumber(0xff)).toBeNaN()
    expect(numberToFloat8E4M3fnBits(NaN)).toBe(0x7f)
    expect(numberToFloat8E4M3fnBits(464)).toBe(0x7e) // tie between 448 and the NaN slot: even wins
    expect(numberToFloat8E4M3fnBits(nextUp(464))).toBe(0x7f)
    expect(numberToFloat8E4M3fnBits(480)).toBe(0x7f)
    expect(numberToFloat8E4M3fnBits(-1e9)).toBe(0xff)
    expect(numberToFloat8E4M3fnBits(Infinity)).toBe(0x7f)
    expect(numberToFloat8E4M3fnBits(-Infinity)).toBe(0xff)
    let nans = 0
    for (let b = 0; b < 256; b++) if (Number.isNaN(float8E4M3fnBitsToNumber(b))) nans++
    expect(nans).toBe(2)
  })
})

describe("float8_e5m2", () => {
  it("matches known bit patterns", () => {
    expect(numberToFloat8E5M2Bits(1)).toBe(0x3c)
    expect(numberToFloat8E5M2Bits(-1.5)).toBe(0xbe)
    expect(numberToFloat8E5M2Bits(57344)).toBe(0x7b)
    expect(numberToFloat8E5M2Bits(2 ** -14)).toBe(0x04)
    expect(numberToFloat8E5M2Bits(2 ** -16)).toBe(0x01)
    expect(float8E5M2BitsToNumber(0x03)).toBe(3 * 2 ** -16)
  })

  it("overflows to infinity at the IEEE boundary and has IEEE NaNs", () => {
    expect(numberToFloat8E5M2Bits(nextDown(61440))).toBe(0x7b)
    expect(numberToFloat8E5M2Bits(61440)).toBe(0x7c)
    expect(numberToFloat8E5M2Bits(Infinity)).toBe(0x7c)
    expect(numberToFloat8E5M2Bits(-Infinity)).toBe(0xfc)
    expect(float8E5M2BitsToNumber(0x7c)).toBe(Infinity)
    expect(float8E5M2BitsToNumber(0xfc)).toBe(-Infinity)
    expect(numberToFloat8E5M2Bits(NaN)).toBe(0x7f)
    for (const b of [0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff]) expect(float8E5M2BitsToNumber(b)).toBeNaN()
  })
})
