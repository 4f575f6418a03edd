/**
 * Which allocator a tensor factory uses: the innermost allocator scope of its device, else the
 * default CPU allocator, or the allocator that a native package registered for the device. Promise
 * code makes a scope with `withAllocator` (it lasts across awaits); Effect code with
 * `TensorlaneMemory.withAllocator`, which sets the `CurrentAllocator` reference of its fiber. Tensor
 * factories are synchronous: they read the scope of the code that calls them, either kind. And the
 * storage ids every allocator hands out.
 */
import * as Context from "effect/Context"
import * as Fiber from "effect/Fiber"
import type { Allocator, DeviceAllocatorFactory } from "./Allocator.js"
import { cpuAllocator } from "./CpuMemory.js"
import { type Device, parseDevice } from "./Device.js"
import { DeviceError } from "./Errors.js"
import { type AllocatorScope, state } from "./internal/allocatorState.js"

export { nextStorageId } from "./internal/allocatorState.js"

/** The allocator scope of Effect code: a fiber's innermost `TensorlaneMemory.withAllocator` (undefined outside any). */
export const CurrentAllocator = Context.Reference<AllocatorScope | undefined>("@tensorlane/core/CurrentAllocator", { defaultValue: () => undefined })

/**
 * The innermost scope of the running code: the running fiber's, or the Promise one (a fiber runs
 * inside the Promise code that started it, and may call `withAllocator` itself: whichever scope was
 * made inside the other is the inner one).
 */
export const innermostScope = (): AllocatorScope | undefined => {
  const promised = state.scope.getStore()
  const fiber = Fiber.getCurrent()
  const effected = fiber === undefined ? undefined : fiber.getRef(CurrentAllocator)
  if (effected === undefined) return promised
  for (let s = promised; s !== undefined; s = s.parent) if (s === effected) return promised
  return effected
}

/**
 * Runs `fn` (sync or async) with `allocator` as the allocator of its device: tensor factories
 * inside it, across awaits, allocate from it unless given an explicit allocator.
 */
export const withAllocator = <A>(allocator: Allocator, fn: () => A): A => state.scope.run({ allocator, parent: innermostScope() }, fn)

/** The allocator factories use for `device`: the innermost scope of it, else the default. */
export const currentAllocator = (device: Device): Allocator => {
  const d = parseDevice(device)
  for (let s = innermostScope(); s !== undefined; s = s.parent) {
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
