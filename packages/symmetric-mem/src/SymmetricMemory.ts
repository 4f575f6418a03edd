/**
 * Collective symmetric-heap allocation inside actors, with the semantics of nvmath-python's
 * allocate_symmetric_memory / free_symmetric_memory: every rank of a group calls allocateSymmetric
 * and freeSymmetric in the same order; one gather per call agrees sizes (and call and free order);
 * with makeSymmetric every rank gets a buffer of the largest size but a tensor of exactly its own
 * shape. Symmetric tensors are ordinary core tensors (their storage lies in the heap): methods may
 * return them and any transport moves them. Frees are collective and explicit: a symmetric tensor
 * collected without freeSymmetric only raises a warning (a finaliser cannot run a collective call).
 */
import { type DType, type Device, type GroupMember, type Storage, Tensor, UnsupportedOperationError, dtypeOf, group as groupOf, isTensor } from "@tensorlane/core"
import { checkShape, messageOf, numelOf } from "@tensorlane/core/plugin"
import type { Gather, SymmetricBlock } from "./Backend.js"
import { SymmetricFreeError } from "./Errors.js"
import { type Statement, agree } from "./internal/agreement.js"
import { type BackendName, backendFor } from "./Backends.js"
import { loadAddon } from "./Loader.js"

export interface AllocateSymmetricOptions {
  /** The collective group (by name) whose members allocate together. */
  readonly group: string
  /** Default float32. */
  readonly dtype?: DType
  /** Allow different sizes per rank: every rank gets a buffer of the largest size, and a tensor of its own shape. */
  readonly makeSymmetric?: boolean
  /** nvmath-python's option: peerTensor then assumes every rank's shape is this one. Sizes are still compared (the ranks gather anyway). */
  readonly skipSymmetricCheck?: boolean
  /** Default: the group's backend when it is "shm". */
  readonly backend?: BackendName
  /** GPU backends: the device the heap lives on (default cuda:0). */
  readonly device?: Device
  /** Limit for the gather. Default: none. */
  readonly timeoutMs?: number
}

export interface FreeSymmetricOptions {
  readonly timeoutMs?: number
}

interface Allocation {
  readonly id: number
  readonly group: string
  readonly heap: string
  readonly backend: string
  readonly dtype: DType
  /** By rank. */
  readonly shapes: ReadonlyArray<ReadonlyArray<number>>
  readonly block: SymmetricBlock
  readonly label: string
  freed: boolean
}

/** Collective calls made per group heap, so that every rank numbers its calls alike. */
const sequence = new Map<string, number>()
/** Own and peer storages of live allocations; `rank` of the copy a storage covers. */
const storages = new WeakMap<Storage, { readonly allocation: Allocation; readonly peer: boolean }>()
/** The tensors allocateSymmetric returned (freeSymmetric takes those, not views of them). */
const originals = new WeakMap<Tensor, Allocation>()

const leaks = new FinalizationRegistry<Allocation>((allocation) => {
  if (allocation.freed) return
  process.emitWarning(
    `${allocation.label} was garbage-collected without freeSymmetric: its heap block stays allocated on every rank. Free symmetric tensors explicitly (freeSymmetric is collective and cannot run in a finaliser).`,
    { type: "SymmetricMemoryWarning", code: "TENSORLANE_SYMMETRIC_LEAK" },
  )
})

const nextSeq = (key: string): number => {
  const seq = (sequence.get(key) ?? 0) + 1
  sequence.set(key, seq)
  return seq
}

const gatherOf = (member: GroupMember, timeoutMs: number | undefined): Gather => (blob) => member.allGather(blob, { timeoutMs })

/** Bytes of a tensor of this shape and dtype, validated by core (ShapeError, DTypeError). */
const byteLengthOf = (shape: ReadonlyArray<number>, dtype: DType): number => numelOf(checkShape(shape)) * dtypeOf(dtype).itemSize

/**
 * A tensor of `shape` on the group's symmetric heap; every member of the group calls it, in the
 * same order. Without makeSymmetric, different sizes fail on every rank (SymmetricMismatchError), as
 * do different makeSymmetric or skipSymmetricCheck options.
 */
export const allocateSymmetric = async (shape: ReadonlyArray<number>, dtypeOrOptions: DType | AllocateSymmetricOptions, maybeOptions?: AllocateSymmetricOptions): Promise<Tensor> => {
  const options = typeof dtypeOrOptions === "string" ? { ...maybeOptions, dtype: dtypeOrOptions } : dtypeOrOptions
  if (typeof options?.group !== "string") {
    throw new UnsupportedOperationError({ message: "allocateSymmetric needs { group }: the name of a collective group every rank is in" })
  }
  const member = groupOf(options.group)
  const backend = backendFor(options.backend, member)
  const heap = backend.heapId(member)
  const key = `${member.name}|${heap}`
  const seq = nextSeq(key)
  const makeSymmetric = options.makeSymmetric === true
  // A bad dtype, shape or device on one rank is stated in the gather, so that the others fail too instead of waiting.
  let dtype: DType = "float32"
  let bytes = 0
  let refusal: unknown
  try {
    dtype = dtypeOf(options.dtype ?? "float32").name
    bytes = byteLengthOf(shape, dtype)
    const refused = backend.refuse?.(member, { device: options.device })
    if (refused !== undefined) throw refused
  } catch (error) {
    refusal = error
  }
  const skipSymmetricCheck = options.skipSymmetricCheck === true
  // Every rank states its size even with skipSymmetricCheck: a rank that skipped the gather would
  // meet the others' statements in its backend's own gather, and once gathered, unequal sizes are
  // refused rather than left to break the heap.
  const mine: Statement = {
    op: "allocate",
    seq,
    heap,
    digest: backend.digest(member),
    bytes,
    shape: refusal === undefined ? [...shape] : [],
    dtype,
    makeSymmetric,
    skipSymmetricCheck,
    ...(refusal === undefined ? {} : { error: messageOf(refusal) }),
  }
  const gather = gatherOf(member, options.timeoutMs)
  let all: ReadonlyArray<Statement>
  try {
    all = await agree(member.name, member.rank, mine, gather)
  } catch (error) {
    throw refusal ?? error
  }
  const allocations = all as ReadonlyArray<Extract<Statement, { op: "allocate" }>>
  // nvmath's skipSymmetricCheck: this rank's shape stands for every rank's (peerTensor's views).
  const shapes = skipSymmetricCheck ? allocations.map(() => shape) : allocations.map((s) => s.shape)
  const size = Math.max(...allocations.map((s) => s.bytes))
  const block = await backend.allocate(member, size, gather, { device: options.device, timeoutMs: options.timeoutMs })
  const allocation: Allocation = {
    id: seq,
    group: member.name,
    heap,
    backend: backend.name,
    dtype,
    shapes,
    block,
    label: `symmetric allocation #${seq} (${dtype} [${shape.join(", ")}], ${size} bytes per rank) of group "${member.name}" on ${backend.name}`,
    freed: false,
  }
  const storage = block.storage(member.rank, bytes, () => allocation.freed)
  const tensor = Tensor.fromStorage(storage, { dtype, shape })
  storages.set(storage, { allocation, peer: false })
  originals.set(tensor, allocation)
  leaks.register(storage, allocation, storage)
  return tensor
}

/** The allocation a tensor belongs to: its own, a view's or a peer copy's (undefined for a foreign tensor). */
const allocationOf = (tensor: unknown): Allocation | undefined =>
  isTensor(tensor) ? (originals.get(tensor) ?? storages.get(tensor.storage)?.allocation) : undefined

const refusalOf = (tensor: unknown): SymmetricFreeError | undefined => {
  if (Array.isArray(tensor)) {
    return new SymmetricFreeError({ message: "freeSymmetric takes tensors as arguments, not an array of them: freeSymmetric(...tensors)", reason: "foreign" })
  }
  if (!isTensor(tensor)) return new SymmetricFreeError({ message: "freeSymmetric takes tensors", reason: "foreign" })
  const allocation = originals.get(tensor)
  if (allocation !== undefined) {
    return allocation.freed ? new SymmetricFreeError({ message: `${allocation.label} was freed already`, reason: "double-free" }) : undefined
  }
  const known = storages.get(tensor.storage)
  if (known === undefined) {
    return new SymmetricFreeError({ message: "the tensor was not allocated by allocateSymmetric in this process", reason: "foreign" })
  }
  return new SymmetricFreeError({
    message: `the tensor is ${known.peer ? "a peer's copy" : "a view"} of ${known.allocation.label}; pass the tensor allocateSymmetric returned`,
    reason: "view",
  })
}

/**
 * Refuses to free a block some object still exports for in-place reads (the shm transport pins the
 * bytes it describes until the object is released): a consumer reads at fetch time, so a block
 * freed and handed to a new allocation would give it other data. Every rank's copy is checked,
 * since this process may export a peer's copy.
 */
const exportRefusal = (allocation: Allocation): SymmetricFreeError | undefined => {
  if (allocation.block.device !== "cpu") return undefined
  const addon = loadAddon()
  const holders = allocation.shapes.flatMap((shape, rank) =>
    addon.exportsOver(allocation.block.storage(rank, byteLengthOf(shape, allocation.dtype), () => false).bytes).map((id) => `${id} (rank ${rank}'s copy)`),
  )
  if (holders.length === 0) return undefined
  return new SymmetricFreeError({
    message: `${allocation.label} is still exported for in-place reads by ${holders.join(", ")}: release those objects before freeing it (freed, its block would go to the next allocation while consumers may still read it)`,
    reason: "exported",
  })
}

/**
 * Frees tensors allocateSymmetric returned; collective: every rank frees the same allocations in
 * the same order. A view, a peer's copy or a double free still takes part in the gather of its
 * allocation's group, stating the refusal, so that every rank of that group fails in the same
 * round and the next call lines up. A foreign tensor names no group: it fails on this rank only
 * (and in the gathers of the other tensors' groups, if any).
 */
export const freeSymmetric = async (...args: ReadonlyArray<Tensor | FreeSymmetricOptions>): Promise<void> => {
  const last = args[args.length - 1]
  // Only a plain object ends the list as options: anything else is refused as not a tensor.
  const options: FreeSymmetricOptions = typeof last === "object" && last !== null && !Array.isArray(last) && !isTensor(last) ? last : {}
  const tensors = args.filter((a) => a !== options) as ReadonlyArray<Tensor>
  let failure: unknown
  const byGroup = new Map<string, Array<Allocation>>()
  for (const tensor of tensors) {
    const allocation = allocationOf(tensor)
    // No refusal of the tensor itself means it is an allocation's own tensor, not yet freed.
    failure ??= refusalOf(tensor) ?? exportRefusal(allocation!)
    if (allocation === undefined) continue
    const list = byGroup.get(allocation.group) ?? []
    if (list.includes(allocation)) {
      failure ??= new SymmetricFreeError({ message: `${allocation.label} is passed twice`, reason: "double-free" })
      continue
    }
    list.push(allocation)
    byGroup.set(allocation.group, list)
  }
  // Groups in name order: the same order on every rank that frees the same tensors. Every group's
  // gather runs even after a failure (stated in it), so no rank of any group is left waiting.
  for (const name of [...byGroup.keys()].sort()) {
    const allocations = byGroup.get(name)!
    let member: GroupMember
    try {
      member = groupOf(name)
    } catch (error) {
      for (const a of allocations) a.freed = true
      failure ??= new SymmetricFreeError({ message: `group "${name}" of ${allocations[0].label} is gone: ${messageOf(error)}`, reason: "group-gone" })
      continue
    }
    const heap = allocations[0].heap
    const mine: Statement = {
      op: "free",
      seq: nextSeq(`${name}|${heap}`),
      heap,
      ids: allocations.map((a) => a.id),
      ...(failure === undefined ? {} : { error: messageOf(failure) }),
    }
    try {
      await agree(name, member.rank, mine, gatherOf(member, options.timeoutMs))
    } catch (error) {
      failure ??= error
      continue
    }
    // Each one, even after one failed: a backend's free may be collective (nccl-window), and the
    // other ranks go on to the next ones.
    for (const allocation of allocations) {
      allocation.freed = true
      try {
        await allocation.block.free(options.timeoutMs)
      } catch (error) {
        failure ??= error
      }
    }
  }
  if (failure !== undefined) throw failure
}

/**
 * Rank `rank`'s copy of a symmetric tensor (its shape on that rank): reads and writes go to that
 * rank's memory directly (one-sided). Invalid once the allocation is freed.
 */
export const peerTensor = (tensor: Tensor, rank: number): Tensor => {
  const allocation = originals.get(tensor)
  const refusal = refusalOf(tensor)
  if (allocation === undefined || refusal !== undefined) throw refusal!
  const worldSize = allocation.shapes.length
  if (!Number.isSafeInteger(rank) || rank < 0 || rank >= worldSize) {
    throw new UnsupportedOperationError({ message: `peerTensor: rank ${rank} is not in group "${allocation.group}" (world size ${worldSize})` })
  }
  const shape = allocation.shapes[rank]
  const storage = allocation.block.storage(rank, byteLengthOf(shape, allocation.dtype), () => allocation.freed)
  storages.set(storage, { allocation, peer: true })
  return Tensor.fromStorage(storage, { dtype: allocation.dtype, shape })
}

/** Whether `tensor` is one allocateSymmetric returned and not yet freed. */
export const isSymmetric = (tensor: Tensor): boolean => originals.get(tensor)?.freed === false
