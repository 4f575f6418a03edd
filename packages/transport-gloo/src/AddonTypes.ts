/**
 * The surface of the native addon (`build/Release/tensorlane_gloo.node`), written by hand from
 * native/GlooGroup.cc and native/Addon.cc. Errors it throws or rejects with are core's
 * NativeFailure (`@tensorlane/core/native`): the transport maps each code to a typed error.
 */

/** One blocking operation running on a native thread. */
export interface NativeOperation {
  readonly promise: Promise<void>
  /**
   * Settles once gloo no longer touches the operation's buffers: when the operation settles, or for
   * buffers it left posted (an abort cannot take them back), once their pairs close (the peer died,
   * or the group was destroyed; `Group.sweep` looks).
   */
  readonly retired: Promise<void>
  /** Ends the operation's gloo waits; its promise then rejects with code "aborted" (a collective instead breaks the group). */
  readonly abort: () => void
}

/** One rank's membership of a gloo group: a gloo context with one TCP pair per peer. */
export interface NativeGroup {
  readonly rank: number
  readonly size: number
  /** Why the group no longer works (a gloo timeout or I/O error poisons its context), else undefined. */
  readonly broken: string | undefined
  /**
   * What aborted operations keep: gloo cannot take back a posted send or receive, so its buffers
   * (and the tensor memory they point into) stay with the group until their pairs close.
   */
  readonly stranded: { readonly operations: number; readonly bytes: number }
  /**
   * The send buffer the kernel gives the socket to each peer, by rank (undefined for this rank);
   * empty until the group connects and once it is destroyed. Sockets to a peer on this host get
   * TENSORLANE_GLOO_SEND_BUFFER bytes (default 512 KiB; "kernel" leaves it to the kernel), which the
   * kernel reports doubled; sockets to other hosts keep the kernel's own.
   */
  readonly sendBuffers: ReadonlyArray<number | undefined>
  /**
   * This rank's blob for the all-gather: the address of each of its pairs, and on rank 0 the group's
   * secret, which every member needs and nobody else may see.
   */
  address(): Uint8Array
  /**
   * Connects every pair with every rank's blob (by rank), each end proving the group's secret; a
   * connection that does not is closed and the pair waits on for its peer. Throws code "protocol"
   * for a malformed blob, rejects with "protocol" when the process listening for a peer does not
   * prove it, "timeout" when a peer did not connect within five times the connect timeout.
   */
  connect(blobs: ReadonlyArray<Uint8Array>): Promise<void>
  /** Sends every buffer to `peer` under slots derived from `objectId`. */
  send(peer: number, objectId: string, buffers: ReadonlyArray<Uint8Array>, timeoutMs: number): NativeOperation
  /** Receives into every buffer from `peer`: exactly their lengths, after checking the sender's header. */
  receive(peer: number, objectId: string, buffers: ReadonlyArray<Uint8Array>, timeoutMs: number): NativeOperation
  /**
   * In place, one tensor after the other; `dtypes` names each buffer's element type. The ranks first
   * compare what they pass: where they differ every rank rejects with code "shape". A call this rank
   * refuses (code "usage" or "dtype") still takes its part as refused, so that the others reject at once.
   */
  allreduce(
    buffers: ReadonlyArray<Uint8Array>,
    dtypes: ReadonlyArray<string>,
    op: "sum" | "product" | "min" | "max",
    timeoutMs: number,
  ): NativeOperation
  /** In place: the root's buffers overwrite everyone else's; compared and refused as `allreduce`. */
  broadcast(buffers: ReadonlyArray<Uint8Array>, root: number, timeoutMs: number): NativeOperation
  /** Takes this rank's part in the next collective as refused (a check before the addon failed): the others reject with code "shape". */
  refuse(timeoutMs: number): void
  /** Aborts running operations and closes the pairs; later operations reject with code "closed". Not on an attached group. */
  destroy(): void
  /** Lets go of what aborted operations left posted on pairs that have closed since (a peer died); from any thread. */
  sweep(): void
  /** Makes the connected group reachable by name from every thread of the process (`Group.attach`) until destroyed. */
  publish(name: string): void
}

export interface GroupOptions {
  /**
   * If this group opens the process's gloo device (the first group of the process), the device's
   * thread keeps to this rank's share of the CPUs the process may use, disjoint from the other
   * ranks' shares (none when the group has more ranks than CPUs). TENSORLANE_GLOO_DEVICE_CPUS,
   * when set, decides instead.
   */
  readonly deviceCpusByRank?: boolean
}

export interface GlooGroupClass {
  new (rank: number, size: number, connectTimeoutMs: number, options?: GroupOptions): NativeGroup
  /** The group published under `name` by any thread of this process, shared (it is never closed through this handle); undefined when there is none. */
  attach(name: string): NativeGroup | undefined
  /** The names of this process's published groups. */
  published(): ReadonlyArray<string>
}

export interface GlooAddon {
  readonly Group: GlooGroupClass
  /** Opens (or reuses) the process's gloo TCP device and describes it. */
  readonly deviceAddress: () => string
  readonly glooVersion: string
}
