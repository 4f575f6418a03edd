/**
 * Which allocator a tensor factory uses: the innermost `withAllocator` scope of its device (across
 * awaits), else the default CPU allocator, or the allocator that a native package registered for the
 * device. And the storage ids every allocator hands out.
 */
import type { Allocator, DeviceAllocatorFactory } from "./Allocator.js"
import { cpuAllocator } from "./CpuMemory.js"
import { type Device, parseDevice } from "./Device.js"
import { DeviceError } from "./Errors.js"
import { state } from "./internal/allocatorState.js"

export { nextStorageId } from "./internal/allocatorState.js"

/**
 * Runs `fn` (sync or async) with `allocator` as the allocator of its device: tensor factories
 * inside it, across awaits, allocate from it unless given an explicit allocator.
 */
export const withAllocator = <A>(allocator: Allocator, fn: () => A): A =>
  state.scope.run({ allocator, parent: state.scope.getStore() }, fn)

/** The allocator factories use for `device`: the innermost `withAllocator` scope of it, else the default. */
export const currentAllocator = (device: Device): Allocator => {
  const d = parseDevice(device)
  for (let s = state.scope.getStore(); s !== undefined; s = s.parent) {
    if (s.allocator.device === d) return s.allocator
  }
  if (d === "cpu") return cpuAllocator
  const cached = state.deviceAllocators.get(d)
  if (cached !== undefined) return cached
  const factory = state.factories.get("cuda")
  if (factory === undefined) {
    throw new DeviceError({
      message: `no allocator is registered for ${d}: install @tensorlane/transport-nccl, which provides CUDA memory`,
      device: d,
    })
  }
  const allocator = factory(d)
  state.deviceAllocators.set(d, allocator)
  return allocator
}

/** For native packages: provides the allocators of a device kind (replacing an earlier registration). */
export const registerDeviceAllocator = (kind: "cuda", factory: DeviceAllocatorFactory): void => {
  if (kind !== "cuda") {
    throw new DeviceError({ message: `cannot register allocators for device kind ${String(kind)}`, device: String(kind) })
  }
  state.factories.set(kind, factory)
  for (const d of state.deviceAllocators.keys()) if (d.startsWith(`${kind}:`)) state.deviceAllocators.delete(d)
}
