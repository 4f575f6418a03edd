/**
 * Megatron's allocator contexts as `await using` scopes:
 *
 *     await using mem = await ncclMem(pool, { group: "dp" })
 *     const grads = mem.run(() => Tensor.zeros([1024], { device: "cuda:0" }))   // from the pool
 *     // leaving the scope registers the pool's new segments with "dp" on every rank
 *
 * `run(fn)` makes the pool the allocator of its device inside `fn` (sync or async, across awaits;
 * core's withAllocator): JavaScript cannot change the ambient allocator from a `using` declaration
 * alone, so allocations inside the scope go through `run` or name `mem.allocator` explicitly.
 *
 * Modes: "new-segments" (default) registers on exit only the segments not yet registered;
 * "reregister" is Megatron's behaviour, deregistering the whole pool on enter and registering it all
 * again on exit (for NCCL versions or setups that must see one registration per context). When
 * deregistering from a later group fails, the groups already deregistered are registered again
 * (with the kind they had) before the error is raised, so entering changes nothing. That is collective
 * too: members of an earlier group who are not in the failing one entered their scope without error,
 * and take part in it when they leave their scope (which registers the pool with that group anyway).
 * Groups are registered in one canonical order (by name), the same on every rank, since window
 * registration is collective. Each group's registration is all-or-nothing across its members; a
 * failure with a later group leaves earlier groups registered (their members not in the failing
 * group have already left the scope).
 */
import { type Allocator, withAllocator } from "@tensorlane/core"
import { messageOf } from "@tensorlane/core/plugin"
import { NcclRegistrationError } from "./Errors.js"
import { type PoolGroup, type RegistrationOptions, deregisterMemPool, registerMemPool, resolveGroup } from "./MemPoolRegistration.js"
import type { NcclMemPool } from "./NcclMemPool.js"

export type RegistrationMode = "new-segments" | "reregister"

export interface NcclMemScope extends AsyncDisposable {
  readonly pool: NcclMemPool
  /** The allocator inside the scope: the pool, or undefined when the scope is disabled. */
  readonly allocator: Allocator | undefined
  /** Runs `fn` with the pool as the allocator of its device (a disabled scope runs it unchanged). */
  readonly run: <A>(fn: () => A) => A
}

export interface NcclMemOptions extends RegistrationOptions {
  /** The group to register with on exit (in an actor: a group name, or `group(name)`). */
  readonly group?: PoolGroup | string
  /** Megatron's `enabled`: false makes the scope do nothing at all. Default true. */
  readonly enabled?: boolean
  readonly mode?: RegistrationMode
}

const scope = (pool: NcclMemPool, allocator: Allocator | undefined, exit: () => Promise<void>): NcclMemScope => {
  let exited = false
  return {
    pool,
    allocator,
    run: (fn) => (allocator === undefined ? fn() : withAllocator(allocator, fn)),
    [Symbol.asyncDispose]: async () => {
      if (exited) return
      exited = true
      await exit()
    },
  }
}

/** Groups in the order every rank uses: by name, each once. */
const canonical = (groups: ReadonlyArray<PoolGroup | string>): Array<PoolGroup> => {
  const byName = new Map(groups.map(resolveGroup).map((g) => [g.name, g]))
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

/** Deregisters the pool from every group, in order; on a failure registers the groups already done again, then raises it. */
const deregisterAll = async (pool: NcclMemPool, groups: ReadonlyArray<PoolGroup>, options: RegistrationOptions): Promise<void> => {
  const kinds = new Map(groups.map((g) => [g.name, pool.registrations.get(g.name)?.values().next().value?.kind]))
  const done: Array<PoolGroup> = []
  try {
    for (const g of groups) {
      await deregisterMemPool(pool, g, options)
      done.push(g)
    }
  } catch (error) {
    const failed = groups[done.length]
    const undoFailures: Array<string> = []
    for (const g of done.reverse()) {
      const kind = kinds.get(g.name)
      await registerMemPool(pool, g, { ...options, symmetric: kind === undefined ? options.symmetric : kind === "window" }).catch((undo: unknown) => {
        undoFailures.push(`registering "${g.name}" again: ${messageOf(undo)}`)
      })
    }
    if (undoFailures.length === 0) throw error
    throw new NcclRegistrationError({
      message: `${messageOf(error)}; and ${undoFailures.join("; ")}`,
      group: failed.name,
      failedRanks: error instanceof NcclRegistrationError ? error.failedRanks : [failed.rank],
    })
  }
}

const enter = async (pool: NcclMemPool, groups: ReadonlyArray<PoolGroup>, options: RegistrationOptions & { mode?: RegistrationMode }): Promise<NcclMemScope> => {
  if (options.mode === "reregister") await deregisterAll(pool, groups, options)
  return scope(pool, pool, async () => {
    for (const g of groups) await registerMemPool(pool, g, options)
  })
}

/** Megatron's nccl_mem: the pool allocates inside the scope; on exit its segments are registered with `group`. */
export const ncclMem = (pool: NcclMemPool, options: NcclMemOptions = {}): Promise<NcclMemScope> => {
  if (options.enabled === false) return Promise.resolve(scope(pool, undefined, async () => undefined))
  return enter(pool, options.group === undefined ? [] : [resolveGroup(options.group)], options)
}

/** Megatron's MultiGroupMemPoolAllocator: one pool registered with several groups, in canonical order. */
export const multiGroupMemPool = (
  pool: NcclMemPool,
  groups: ReadonlyArray<PoolGroup | string>,
  options: RegistrationOptions & { readonly mode?: RegistrationMode } = {},
): Promise<NcclMemScope> => enter(pool, canonical(groups), options)

/** Megatron's MemPoolAllocatorWithoutRegistration: the pool allocates inside the scope; registration is left to the caller. */
export const memPoolWithoutRegistration = (pool: NcclMemPool): NcclMemScope => scope(pool, pool, async () => undefined)
