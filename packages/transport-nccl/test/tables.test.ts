/** The version and dtype tables: parsing ncclGetVersion codes, feature gates, NCCL's dtypes. */
import { DTypes, type DType } from "@tensorlane/core"
import { describe, expect, it } from "vitest"
import { featureTable, formatNcclVersion, ncclDataType, parseNcclVersion, reductionType, requireFeature, supports } from "../src/index.js"

describe("NCCL versions", () => {
  it("parses the codes of 2.9 and later (major*10000) and of earlier versions (major*1000)", () => {
    expect(parseNcclVersion(22809)).toEqual({ major: 2, minor: 28, patch: 9, code: 22809 })
    expect(parseNcclVersion(22703)).toMatchObject({ major: 2, minor: 27, patch: 3 })
    expect(parseNcclVersion(21903)).toMatchObject({ major: 2, minor: 19, patch: 3 })
    expect(parseNcclVersion(2804)).toMatchObject({ major: 2, minor: 8, patch: 4 })
    expect(formatNcclVersion(parseNcclVersion(22809))).toBe("2.28.9")
  })

  it("gates registration at 2.19, float8 at 2.24 and windows at 2.27.3", () => {
    const table = (code: number) => featureTable(parseNcclVersion(code))
    expect(table(21805)).toEqual({ nonblocking: true, bfloat16: true, registration: false, float8: false, windows: false })
    expect(table(21900)).toMatchObject({ registration: true, float8: false, windows: false })
    expect(table(22403)).toMatchObject({ float8: true, windows: false })
    expect(table(22702)).toMatchObject({ windows: false })
    expect(table(22703)).toMatchObject({ windows: true })
    expect(supports(parseNcclVersion(2804), "bfloat16")).toBe(false)
  })

  it("a feature the loaded version lacks is a NcclVersionError naming both versions", () => {
    expect(() => requireFeature(parseNcclVersion(22700), "windows", "registering windows")).toThrow(
      expect.objectContaining({ _tag: "NcclVersionError", feature: "windows", required: "2.27.3", found: "2.27.0" }),
    )
    expect(() => requireFeature(parseNcclVersion(22703), "windows", "registering windows")).not.toThrow()
  })
})

describe("NCCL dtypes", () => {
  const v = parseNcclVersion(22809)

  it("maps every reducible dtype to nccl.h's ncclDataType_t", () => {
    expect(ncclDataType).toEqual({
      int8: 0,
      uint8: 1,
      int32: 2,
      uint32: 3,
      int64: 4,
      uint64: 5,
      float16: 6,
      float32: 7,
      float64: 8,
      bfloat16: 9,
      float8_e4m3fn: 10,
      float8_e5m2: 11,
    })
    for (const dtype of Object.keys(ncclDataType) as Array<DType>) expect(reductionType(dtype, v, "allreduce")).toBe(ncclDataType[dtype as keyof typeof ncclDataType])
  })

  it("int16, uint16 and bool cannot be reduced (DTypeError); every core dtype is either mapped or refused", () => {
    const refused = (Object.keys(DTypes) as Array<DType>).filter((d) => !(d in ncclDataType))
    expect(refused.sort()).toEqual(["bool", "int16", "uint16"])
    for (const d of refused) expect(() => reductionType(d, v, "allreduce")).toThrow(expect.objectContaining({ _tag: "DTypeError" }))
  })

  it("bfloat16 needs 2.10 and the float8 formats 2.24", () => {
    expect(() => reductionType("bfloat16", parseNcclVersion(2804), "allreduce")).toThrow(expect.objectContaining({ _tag: "NcclVersionError", required: "2.10.0" }))
    expect(reductionType("bfloat16", parseNcclVersion(21003), "allreduce")).toBe(9)
    expect(() => reductionType("float8_e4m3fn", parseNcclVersion(22305), "allreduce")).toThrow(expect.objectContaining({ _tag: "NcclVersionError", required: "2.24.0" }))
    expect(reductionType("float8_e5m2", parseNcclVersion(22403), "allreduce")).toBe(11)
  })
})
