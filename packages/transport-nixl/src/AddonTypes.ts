/**
 * The surface of the native addon (`build/Release/tensorlane_nixl.node`), written by hand from
 * native/Addon.cc. Errors it throws or rejects with are core's NativeFailure
 * (`@tensorlane/core/native`): src/internal/failures.ts maps each code to a typed error.
 */

export type MemoryKind = "dram" | "vram"

/** Local memory: host bytes (a Uint8Array over shared memory) or a device range by address. */
export type NativeMemory =
  | { readonly mem: "dram"; readonly device: number; readonly bytes: Uint8Array }
  | { readonly mem: "vram"; readonly device: number; readonly address: bigint; readonly length: number }

/** A registered region of this process, identified by its start and length. */
export interface RegionKey {
  readonly address: bigint
  readonly length: number
}

export interface NativeRegistration extends RegionKey {
  readonly mem: MemoryKind
  readonly device: number
  /** Objects and pins that hold the region. */
  readonly refs: number
}

/** A region as a producer declares it in an object's metadata. */
export interface DeclaredRegion extends RegionKey {
  readonly mem: MemoryKind
  readonly device: number
}

/** One tensor as the producer laid it out inside a declared region. */
export interface RemoteLayout {
  readonly region: number
  /** Bytes from the region's start to the first element. */
  readonly offset: number
  readonly shape: ReadonlyArray<number>
  /** In elements. */
  readonly strides: ReadonlyArray<number>
  readonly itemSize: number
}

export interface ReadRequest {
  readonly agent: string
  readonly blob: Uint8Array
  readonly epoch: number
  readonly regions: ReadonlyArray<DeclaredRegion>
  readonly remote: ReadonlyArray<RemoteLayout>
  /** Destinations, contiguous, each inside its storage (registered for the read unless already inside a region). */
  readonly local: ReadonlyArray<{ readonly tensor: NativeMemory; readonly storage: NativeMemory }>
}

/** A READ running on a native thread. */
export interface NativeOperation {
  /** Settles once NIXL no longer touches the destinations. */
  readonly promise: Promise<void>
  /** Asks the thread to cancel the READ; the promise then rejects with code "aborted". */
  readonly abort: () => void
}

export interface LoadOptions {
  readonly library: string
  /** Set in the process environment before the library loads, unless already set there. */
  readonly env: Readonly<Record<string, string>>
  /** UCX backend parameters added to the plugin's defaults. */
  readonly backendParams: ReadonlyArray<readonly [string, string]>
  readonly progressDelayUs: number
  /** The most bytes a READ may copy on the thread that asks for it, without a thread of its own. */
  readonly readHereBytes: number
}

export interface NixlAddon {
  /** dlopens libnixl_capi.so once per process; later calls with the same path do nothing. */
  readonly load: (options: LoadOptions) => void
  /** Path of the library loaded in this process (by any thread), if any. */
  readonly loadedLibrary: () => string | undefined
  /** Name of this process's NIXL agent, once created. */
  readonly agentName: () => string | undefined
  /** One more reference on the region holding `memory`, registering the memory when none does; `offset` is where the memory starts inside the region. */
  readonly acquire: (memory: NativeMemory) => RegionKey & { readonly offset: number }
  /** One reference less; the last one deregisters. */
  readonly release: (key: RegionKey) => void
  /** The registered region holding `memory`, if any. */
  readonly regionOf: (memory: NativeMemory) => NativeRegistration | undefined
  /** This agent's metadata blob, and its epoch (bumped by every deregistration). */
  readonly localMetadata: () => { readonly agent: string; readonly blob: Uint8Array; readonly epoch: number }
  readonly registrations: () => ReadonlyArray<NativeRegistration>
  /** Checks the request (throws code "protocol" on a bad descriptor) and starts the READ; `keep` stays referenced until it ends. */
  readonly read: (request: ReadRequest, keep: unknown) => NativeOperation
}

/** What a device allocator puts in `storage.handle` for NIXL to find the memory. */
export interface DeviceMemoryHandle {
  readonly address: bigint
}

/** What travels with an object: enough for a consumer to READ every tensor, and nothing else. */
export interface NixlMetadata {
  readonly version: 1
  /** The producer's NIXL agent name. */
  readonly agent: string
  /** The producer's NIXL metadata blob (connection info and registered memory keys). */
  readonly blob: Uint8Array
  /** The producer's deregistration count when the object was made: a consumer caching an older blob reloads. */
  readonly epoch: number
  /** One entry per registered region the tensors lie in (a storage, a pool, a pinned tensor's storage). */
  readonly regions: ReadonlyArray<DeclaredRegion>
  readonly tensors: ReadonlyArray<RemoteLayout>
}
