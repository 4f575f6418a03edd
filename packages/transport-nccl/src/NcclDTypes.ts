/**
 * tensorlane dtypes as NCCL sees them (ncclDataType_t values of nccl.h). Point-to-point transfers
 * and broadcasts move bytes (ncclUint8: no arithmetic, so every dtype travels on every version);
 * reductions need NCCL's own type, which bfloat16 has since 2.10 and the float8 formats since 2.24.
 * int16, uint16 and bool have no NCCL type and cannot be reduced.
 */
import { type DType, DTypeError } from "@tensorlane/core"
import { type NcclFeature, type NcclVersion, requireFeature } from "./NcclVersion.js"

export const ncclDataType = {
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
} as const satisfies Partial<Record<DType, number>>

/** The byte type every point-to-point transfer uses. */
export const NCCL_BYTES = ncclDataType.uint8

const gates: Partial<Record<DType, NcclFeature>> = { bfloat16: "bfloat16", float8_e4m3fn: "float8", float8_e5m2: "float8" }

/** The ncclDataType_t that reduces `dtype` on the loaded NCCL; DTypeError or NcclVersionError otherwise. */
export const reductionType = (dtype: DType, version: NcclVersion, what: string): number => {
  const value = (ncclDataType as Partial<Record<DType, number>>)[dtype]
  if (value === undefined) {
    throw new DTypeError({ message: `${what}: NCCL cannot reduce ${dtype}; it reduces ${Object.keys(ncclDataType).join(", ")}` })
  }
  const gate = gates[dtype]
  if (gate !== undefined) requireFeature(version, gate, `${what} of ${dtype}`)
  return value
}

export const ncclReduceOp = { sum: 0, product: 1, max: 2, min: 3 } as const
