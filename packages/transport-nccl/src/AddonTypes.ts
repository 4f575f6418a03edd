/**
 * The surface of the native addon (`build/Release/tensorlane_nccl.node`), written by hand from
 * native/Addon.cc. Errors it throws or rejects with are core's NativeFailure
 * (`@tensorlane/core/native`): src/internal/failures.ts maps each code to a typed error.
 */

/** One operation running on a communicator's native thread. */
export interface NativeOperation {
  readonly promise: Promise<void>
  /** Ends the communicator's running wait with ncclCommAbort; `promise` settles once it has; the communicator is broken afterwards. */
  readonly abort: () => void
}

/** A device memory range of an operation; `dtype` is an ncclDataType_t value. */
export interface NativeBuffer {
  readonly address: bigint
  readonly count: number
  readonly dtype: number
}

export interface NativeDevices {
  readonly count: number
  /** cudaDriverGetVersion: 0 when no NVIDIA driver is installed. */
  readonly driverVersion: number
  readonly runtimeVersion: number
  /** cudaGetDeviceCount's error text, when it failed. */
  readonly error: string | undefined
}

export interface NativeCommunicator {
  /** New for every communicator of the process: a group destroyed and created again gets another. */
  readonly id: number
  readonly group: string
  readonly rank: number
  readonly size: number
  readonly device: number
  readonly ready: boolean
  /** Why it was aborted (timeout, abort, NCCL error), else undefined. */
  readonly broken: string | undefined
  readonly registrations: number
  readonly windows: number
}

export interface NcclAddon {
  /** dlopens libnccl.so.2 once per process (again with the same path: no-op; another path: code "usage"). */
  readonly loadNccl: (path: string) => { readonly path: string; readonly version: number }
  readonly loadCudart: (path: string) => string
  readonly loaded: () => { readonly nccl: string | undefined; readonly cudart: string | undefined; readonly ncclVersion: number | undefined }
  /** ncclGetUniqueId: 128 bytes. */
  readonly uniqueId: () => Uint8Array
  readonly probeDevices: () => NativeDevices
  /** cudaMalloc, or ncclMemAlloc when `viaNccl`; code "nodevice" without a driver or device. */
  readonly deviceAlloc: (device: number, byteLength: number, viaNccl: boolean) => bigint
  readonly deviceFree: (device: number, address: bigint, viaNccl: boolean) => void
  readonly copyToDevice: (device: number, destination: bigint, source: Uint8Array) => void
  readonly copyToHost: (device: number, destination: Uint8Array, source: bigint) => void
  readonly copyOnDevice: (device: number, destination: bigint, source: bigint, byteLength: number) => void
  /** Starts the communicator's thread and initializes it there (non-blocking, polled up to timeoutMs). */
  readonly createCommunicator: (group: string, rank: number, size: number, device: number, uniqueId: Uint8Array, timeoutMs: number) => NativeOperation
  /** Deregisters leftover windows and buffers, finalizes and destroys (aborts on failure). */
  readonly destroyCommunicator: (group: string, timeoutMs: number) => Promise<void>
  /** ncclCommAbort on the communicator's thread, after the work posted before; it is broken for `reason` afterwards. */
  readonly abortCommunicator: (group: string, reason: string) => Promise<void>
  readonly communicators: () => ReadonlyArray<NativeCommunicator>
  /** Every buffer to (or from) `peer` inside one ncclGroupStart/ncclGroupEnd. */
  readonly transfer: (group: string, peer: number, send: boolean, buffers: ReadonlyArray<NativeBuffer>, timeoutMs: number) => NativeOperation
  readonly allReduce: (group: string, buffers: ReadonlyArray<NativeBuffer>, op: number, timeoutMs: number) => NativeOperation
  readonly broadcast: (group: string, buffers: ReadonlyArray<NativeBuffer>, root: number, timeoutMs: number) => NativeOperation
  /** ncclCommRegister; resolves with the registration handle. */
  readonly register: (group: string, address: bigint, byteLength: number, timeoutMs: number) => Promise<bigint>
  readonly deregister: (group: string, handle: bigint, timeoutMs: number) => Promise<void>
  /** ncclCommWindowRegister (collective); resolves with the window. */
  readonly registerWindow: (group: string, address: bigint, byteLength: number, symmetric: boolean, timeoutMs: number) => Promise<bigint>
  readonly deregisterWindow: (group: string, window: bigint, timeoutMs: number) => Promise<void>
}

/**
 * What a storage of device memory holds in `handle`: the CUDA address (a bigint) and the device
 * ordinal, plain data so that it crosses to the transfer agent's worker with the storage.
 * transport-nixl reads the same convention.
 */
export interface DeviceMemoryHandle {
  readonly address: bigint
  readonly device: number
}
