/** What every allocator of a thread shares: scopes, device allocator registrations and storage ids. */
import { AsyncLocalStorage } from "node:async_hooks"
import type { Allocator, DeviceAllocatorFactory } from "../Allocator.js"
import type { Device } from "../Device.js"

/** One scope of `withAllocator`, in either face: its allocator, and the scope it was made in. */
export interface AllocatorScope {
  readonly allocator: Allocator
  readonly parent: AllocatorScope | undefined
}

interface AllocatorState {
  nextStorageId: number
  readonly scope: AsyncLocalStorage<AllocatorScope>
  readonly factories: Map<"cuda", DeviceAllocatorFactory>
  readonly deviceAllocators: Map<Device, Allocator>
}

// Shared through globalThis so that duplicated copies of this module (a native package resolving
// its own @tensorlane/core) see the same registrations, scopes and storage ids.
const STATE_KEY = Symbol.for("tensorlane.allocatorState.v1")
export const state: AllocatorState = ((globalThis as { [STATE_KEY]?: AllocatorState })[STATE_KEY] ??= {
  nextStorageId: 1,
  scope: new AsyncLocalStorage<AllocatorScope>(),
  factories: new Map(),
  deviceAllocators: new Map(),
})

/** A fresh storage id for allocators, including those of native packages. */
export const nextStorageId = (): number => state.nextStorageId++
