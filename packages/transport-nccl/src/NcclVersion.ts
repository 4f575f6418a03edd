/**
 * NCCL versions and the features they gate. ncclGetVersion returns major * 10000 + minor * 100 +
 * patch since 2.9 (major * 1000 + minor * 100 + patch before).
 */
import { CLI_COMMAND } from "@tensorlane/core/native"
import { NcclVersionError } from "./Errors.js"

export interface NcclVersion {
  readonly major: number
  readonly minor: number
  readonly patch: number
  /** ncclGetVersion's code. */
  readonly code: number
}

export const parseNcclVersion = (code: number): NcclVersion => {
  const wide = code >= 20900
  const major = Math.floor(code / (wide ? 10000 : 1000))
  const minor = Math.floor((code % (wide ? 10000 : 1000)) / 100)
  return { major, minor, patch: code % 100, code }
}

export const formatNcclVersion = (v: NcclVersion): string => `${v.major}.${v.minor}.${v.patch}`

/** The first NCCL version of each feature this package uses. */
export const ncclFeatures = {
  /** ncclCommInitRankConfig with blocking = 0 (the addon refuses older libraries). */
  nonblocking: "2.14.0",
  bfloat16: "2.10.0",
  /** ncclCommRegister / ncclCommDeregister and ncclMemAlloc / ncclMemFree. */
  registration: "2.19.0",
  float8: "2.24.0",
  /** ncclCommWindowRegister / ncclCommWindowDeregister. */
  windows: "2.27.3",
} as const

export type NcclFeature = keyof typeof ncclFeatures

const codeOf = (version: string): number => {
  const [major, minor, patch] = version.split(".").map(Number)
  return major * 10000 + minor * 100 + patch
}

const wideCode = (v: NcclVersion): number => v.major * 10000 + v.minor * 100 + v.patch

export const supports = (v: NcclVersion, feature: NcclFeature): boolean => wideCode(v) >= codeOf(ncclFeatures[feature])

/** NcclVersionError naming the feature, the version it needs and the one loaded, unless supported. */
export const requireFeature = (v: NcclVersion, feature: NcclFeature, what: string): void => {
  if (supports(v, feature)) return
  throw new NcclVersionError({
    message: `${what} needs NCCL >= ${ncclFeatures[feature]} (${feature}); the loaded libnccl.so.2 is ${formatNcclVersion(v)}. Install the wheel this version of @tensorlane/transport-nccl pins (${CLI_COMMAND} install nccl) or point TENSORLANE_NCCL_LIBRARY at a newer libnccl.so.2`,
    feature,
    required: ncclFeatures[feature],
    found: formatNcclVersion(v),
  })
}

/** Every feature and whether `v` has it. */
export const featureTable = (v: NcclVersion): { readonly [F in NcclFeature]: boolean } =>
  Object.fromEntries(Object.keys(ncclFeatures).map((f) => [f, supports(v, f as NcclFeature)])) as { [F in NcclFeature]: boolean }
