/**
 * The runner's overrides are the ones the loaders read, and the loaders find the device's wheels
 * by themselves: with those overrides removed, transport-nccl and symmetric-mem load an NCCL, a CUDA
 * runtime and an NVSHMEM that python3's installed wheels ship (runner.ts passes their copies).
 */
import * as assert from "node:assert/strict"
import * as fs from "node:fs"
import { nvshmemStatus } from "@tensorlane/symmetric-mem"
import { CUDART_LIBRARY_ENV, NCCL_LIBRARY_ENV, ncclStatus } from "@tensorlane/transport-nccl"
import type { Check } from "../check.js"
import { LIBRARIES_ENV, type WheelLibraries, type WheelLibrary, loaderOverrides } from "../wheelLibraries.js"

/** Fails unless `loaded` is one of the wheels' copies of the library. */
const expectFromWheels = (what: string, loaded: string, copies: ReadonlyArray<WheelLibrary> | undefined): void => {
  const paths = (copies ?? []).map((c) => c.path)
  assert.ok(paths.includes(fs.realpathSync(loaded)), `${what}: the loader took ${loaded}, not one of the wheels' copies (${paths.join(", ") || "none"})`)
}

export const libraries: Check = async (facts) => {
  const wheels = JSON.parse(process.env[LIBRARIES_ENV] ?? "{}") as WheelLibraries
  const overrides = loaderOverrides(wheels)
  for (const env of [NCCL_LIBRARY_ENV, CUDART_LIBRARY_ENV]) assert.ok(env in overrides, `the runner does not set transport-nccl's ${env}`)
  for (const env of Object.keys(overrides)) delete process.env[env]
  const nccl = ncclStatus()
  facts.nccl = { library: nccl.library, version: nccl.version, cudart: nccl.cudart }
  expectFromWheels("NCCL", nccl.library, wheels.nccl)
  expectFromWheels("the CUDA runtime", nccl.cudart, wheels.cudart)
  const nvshmem = nvshmemStatus()
  facts.nvshmem = { library: nvshmem.library, version: nvshmem.version }
  expectFromWheels("NVSHMEM", nvshmem.library, wheels.nvshmem)
}
