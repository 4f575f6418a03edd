/**
 * The native addon's surface (native/Addon.cc and native/NvshmemLibrary.cc), declared by hand. What
 * it throws is core's NativeFailure (`@tensorlane/core/native`), which src/internal/failures.ts maps
 * to a typed error.
 */

export interface SegmentInfo {
  readonly token: string
  readonly fd: number
  readonly pid: number
  readonly dataBytes: number
}

export interface SymmetricAddon {
  /** Creates (O_EXCL) and maps a segment of `dataBytes` under `key`; returns its token. */
  createSegment(key: string, name: string, dataBytes: number): string
  /** Maps an existing segment by name, read-write, checked against its token; returns its data size. */
  openSegment(key: string, name: string, token: string): number
  /** Counts this process as one more opener of the segment (an atomic counter in its header); returns the count. */
  countOpener(key: string): number
  /** Maps another process's open segment read-only through /proc/<pid>/fd/<fd>; returns its data size. */
  openPeerSegment(key: string, pid: number, fd: number, token: string): number
  /** posix_fallocate of [offset, offset + length) of a writable segment's data; false when the file system is full (ENOSPC). */
  reserveSegment(key: string, offset: number, length: number): boolean
  unlinkSegment(name: string): void
  /** Forgets a key (the mapping lives while buffers over it do); false when it was not mapped. */
  detachSegment(key: string): boolean
  /** A SharedArrayBuffer over the data of a writable segment; undefined when the key is not mapped. */
  segmentBuffer(key: string): SharedArrayBuffer | undefined
  segmentInfo(key: string): SegmentInfo | undefined
  segmentKeys(): ReadonlyArray<string>
  /** The writable segment holding all of `bytes`, and their offset in its data. */
  locate(bytes: Uint8Array): { readonly key: string; readonly offset: number } | undefined
  /** memcpy on a libuv thread; both of one length. */
  copy(target: Uint8Array, source: Uint8Array): Promise<void>
  /** memcpy from a mapped segment's data (bounds-checked) on a libuv thread. */
  readSegment(key: string, offset: number, target: Uint8Array): Promise<void>
  /** Records that `objectId` exports `bytes` in place (consumers read them at fetch time), process-wide. */
  pinExport(objectId: string, bytes: Uint8Array): void
  /** Forgets the object's exported ranges; false when it had none. */
  releaseExport(objectId: string): boolean
  /** The objects exporting any byte of `bytes`. */
  exportsOver(bytes: Uint8Array): ReadonlyArray<string>

  nvshmemLoad(path: string): void
  /** The path NVSHMEM was loaded from in this process, if it was. */
  nvshmemLoaded(): string | undefined
  nvshmemVersion(): string
  /** nvshmemx_init_status(): 0 not initialized, 1 bootstrapped, 2 initialized, more for multi-process-per-GPU modes. */
  nvshmemStatus(): number
  nvshmemUniqueId(): Uint8Array
  /** nvshmemx_hostlib_init_attr over a unique-id bootstrap; its return code (0 is success). */
  nvshmemInitialize(rank: number, worldSize: number, uniqueId: Uint8Array): number
  nvshmemMalloc(bytes: number): bigint
  nvshmemFree(pointer: bigint): void
  nvshmemPeer(pointer: bigint, pe: number): bigint
  nvshmemPes(): { readonly myPe: number; readonly nPes: number }

  /**
   * Loads the CUDA driver at `path` (the first that loads stays), initializes it and checks that the
   * device exists; `deviceCount` is -1 when the driver did not load or initialize.
   */
  cudaProbe(path: string, ordinal: number): { readonly usable: boolean; readonly deviceCount: number; readonly reason?: string }
  /** Makes the device's primary context current on this thread (cudaSetDevice's effect); why not, if it could not. */
  cudaMakeCurrent(ordinal: number): string | undefined
  /** The device of this thread's current context; -1 without a driver or a current context. */
  cudaCurrentDevice(): number
}
