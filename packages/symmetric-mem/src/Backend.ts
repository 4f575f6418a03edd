/**
 * How a symmetric-heap backend plugs into allocateSymmetric/freeSymmetric. The front end does the
 * collective bookkeeping every backend shares (validation, the one gather that agrees sizes, call
 * order and free order, the records behind freeSymmetric and peerTensor); a backend only maps
 * agreed sizes to memory. `shm` (POSIX shared memory), `nvshmem` and `nccl-window` implement it.
 */
import type { Device, GroupMember, Storage } from "@tensorlane/core"

/** One control-plane gather among the group's members (every rank calls it in the same order). */
export type Gather = (blob: Uint8Array) => Promise<ReadonlyArray<Uint8Array>>

export interface SymmetricBlock {
  readonly device: Device
  /**
   * A storage over the first `byteLength` bytes of `rank`'s copy of the block (this rank's own copy
   * for the tensor allocateSymmetric returns). `isFreed` tells the storage when the block is gone.
   */
  readonly storage: (rank: number, byteLength: number, isFreed: () => boolean) => Storage
  /** Called by every rank in the same order, after the ranks agreed on what to free; within `timeoutMs` where it waits for the others. */
  readonly free: (timeoutMs?: number) => void | Promise<void>
}

export interface SymmetricBackend {
  readonly name: string
  /** Identifies this rank's heap of the group; ranks whose ids differ are not sharing one heap. */
  readonly heapId: (member: GroupMember) => string
  /** A summary of the heap's allocation state, equal on every rank while they made the same calls. */
  readonly digest: (member: GroupMember) => string
  /**
   * Why this rank cannot take part in an allocation with these options, known before the ranks
   * agree (a device it cannot allocate on): stated in the agreement's gather, so that every rank
   * fails instead of the others waiting in the backend's collective calls.
   */
  readonly refuse?: (member: GroupMember, options: { readonly device?: Device }) => Error | undefined
  /**
   * Allocates `byteLength` bytes (already agreed: the same on every rank) on every rank. A backend
   * that needs its own agreement (every rank got a window, init succeeded everywhere) uses `gather`;
   * `timeoutMs` is the call's limit, for the backend's own collective calls too.
   */
  readonly allocate: (member: GroupMember, byteLength: number, gather: Gather, options: { readonly device?: Device; readonly timeoutMs?: number }) => Promise<SymmetricBlock>
}
