/**
 * Megatron's register_mem_pool / deregister_mem_pool, collective over the ranks of an nccl group:
 * only segments not yet registered with the group are registered, in allocation order, as buffers
 * (ncclCommRegister, NCCL >= 2.19) or as windows (ncclCommWindowRegister, NCCL >= 2.27.3, when
 * symmetric). The ranks first check that they agree on what to do (windows are collective: every
 * rank must register the same segment sizes in the same order), then apply it all-or-nothing: a
 * failure on any rank is rolled back on every rank and raised as NcclRegistrationError everywhere.
 */
import { MissingGroupError, group as memberOf } from "@tensorlane/core"
import { type AgreementGroup, type AgreementOptions, type Step, gatherJson, messageOf, runAgreed, runLockstep } from "@tensorlane/core/plugin"
import { NcclRegistrationError } from "./Errors.js"
import { type NcclMemPool, type PoolSegment, type SegmentRegistration, forgetEndedRegistrations } from "./NcclMemPool.js"
import { requireFeature, supports } from "./NcclVersion.js"
import { communicatorCollective } from "./NcclWindows.js"
import { TRANSPORT, toTensorlaneError } from "./internal/failures.js"
import { type LoadedNccl, loadCuda } from "./Loader.js"

/** What the registration needs of a group: its name, this rank and the control-plane gather. */
export type PoolGroup = AgreementGroup

export interface RegistrationOptions {
  /**
   * Register as NCCL windows (symmetric memory) rather than buffers. Default: the pool's `symmetric`,
   * else Megatron's default (symmetric=True): windows, or buffers when the loaded NCCL is older than
   * 2.27.3 (as Megatron falls back when symmetric registration is unavailable). Asking for windows
   * explicitly on such an NCCL is an NcclVersionError.
   */
  readonly symmetric?: boolean
  /** Limit of each NCCL call and of each exchange between the ranks. Default 60 s. */
  readonly timeoutMs?: number
}

const DEFAULT_TIMEOUT_MS = 60_000

/** A group name (inside an actor: the actor's membership of it) or a group member. */
export const resolveGroup = (group: PoolGroup | string): PoolGroup => (typeof group === "string" ? memberOf(group) : group)

interface Bound {
  readonly loaded: LoadedNccl
  /** The native id of the group's communicator. */
  readonly communicator: number
}

/** The loaded NCCL, checked to hold a communicator for `group` on the pool's device. */
const communicatorFor = (pool: NcclMemPool, group: PoolGroup): Bound => {
  const loaded = loadCuda()
  const comm = loaded.addon.communicators().find((c) => c.group === group.name)
  if (comm === undefined) {
    throw new MissingGroupError({
      message: `process ${process.pid} has no NCCL communicator for group "${group.name}": pools register with nccl groups (cluster.createCollectiveGroup(actors, { backend: "nccl" }))`,
      backend: TRANSPORT,
    })
  }
  if (`cuda:${comm.device}` !== pool.device) {
    throw new MissingGroupError({
      message: `group "${group.name}" communicates on cuda:${comm.device}, but pool "${pool.name}" holds memory on ${pool.device}`,
      backend: TRANSPORT,
    })
  }
  return { loaded, communicator: comm.id }
}

/** Applies the steps on every rank, all or nothing; windows in lockstep, since their calls are collective. */
const apply = (bound: Bound, pool: NcclMemPool, group: PoolGroup, what: string, steps: ReadonlyArray<Step>, windows: boolean, timeoutMs: number): Promise<void> => {
  const options: AgreementOptions = { timeoutMs, error: (failure) => new NcclRegistrationError(failure) }
  if (!windows) return runAgreed(group, what, steps, options)
  const communicator = communicatorCollective(group.name)
  const collective = {
    ...communicator,
    abort: async (reason: string) => {
      await communicator.abort(reason)
      pool.registrations.delete(group.name)
    },
  }
  return runLockstep(group, what, steps, collective, options)
}

const registrationsOf = (pool: NcclMemPool, group: string): Map<number, SegmentRegistration> => {
  let map = pool.registrations.get(group)
  if (map === undefined) pool.registrations.set(group, (map = new Map()))
  return map
}

/** A native call with its failure typed. */
const call = async <A>(loaded: LoadedNccl, pool: NcclMemPool, what: string, run: () => Promise<A>): Promise<A> => {
  try {
    return await run()
  } catch (error) {
    throw toTensorlaneError(error, what, { addon: loaded.addon, device: pool.device })
  }
}

const registerStep = ({ loaded, communicator }: Bound, pool: NcclMemPool, group: string, segment: PoolSegment, kind: SegmentRegistration["kind"], timeoutMs: number): Step => {
  const label = `${kind === "window" ? "ncclCommWindowRegister" : "ncclCommRegister"} of segment ${segment.index} (${segment.byteLength} bytes)`
  const registered = registrationsOf(pool, group)
  return {
    label,
    apply: async () => {
      const handle = await call(loaded, pool, label, () =>
        kind === "window"
          ? loaded.addon.registerWindow(group, segment.address, segment.byteLength, true, timeoutMs)
          : loaded.addon.register(group, segment.address, segment.byteLength, timeoutMs),
      )
      registered.set(segment.index, { kind, handle, communicator })
    },
    undo: async () => {
      await deregisterOne(loaded, pool, group, segment.index, timeoutMs)
    },
  }
}

const deregisterOne = async (loaded: LoadedNccl, pool: NcclMemPool, group: string, index: number, timeoutMs: number): Promise<void> => {
  const registered = registrationsOf(pool, group)
  const registration = registered.get(index)
  if (registration === undefined) return
  const label = `${registration.kind === "window" ? "ncclCommWindowDeregister" : "ncclCommDeregister"} of segment ${index}`
  await call(loaded, pool, label, () =>
    registration.kind === "window"
      ? loaded.addon.deregisterWindow(group, registration.handle, timeoutMs)
      : loaded.addon.deregister(group, registration.handle, timeoutMs),
  )
  registered.delete(index)
}

interface Plan {
  readonly op: "register" | "deregister"
  readonly kind: SegmentRegistration["kind"] | "any"
  readonly sizes: ReadonlyArray<number>
  /** Why this rank refused before any NCCL call (no such communicator, another device, a buffer/window mix, NCCL too old). */
  readonly refused?: string
}

const describePlan = (p: Plan): string => `${p.op} ${p.sizes.length} segment(s) [${p.sizes.join(", ")}] as ${p.kind}`

/**
 * Fails on every rank, before any NCCL call, when a rank refused or the ranks plan different things.
 * A rank that refused raises its own error; the others an NcclRegistrationError naming it. Every
 * rank takes part in the same exchange, so the group's exchanges stay in step.
 */
const agreeOnPlan = async (group: PoolGroup, what: string, plan: Plan, refusal: unknown, timeoutMs: number): Promise<void> => {
  const plans = await gatherJson(group, plan, { timeoutMs })
  const refusedRanks = plans.flatMap((p, rank) => (p.refused === undefined ? [] : [rank]))
  if (plan.refused !== undefined) throw refusal
  if (refusedRanks.length > 0) {
    throw new NcclRegistrationError({
      message: `${what}: ${refusedRanks.map((r) => `rank ${r} refused (${plans[r].refused})`).join("; ")}; nothing was registered or deregistered`,
      group: group.name,
      failedRanks: refusedRanks,
    })
  }
  // Windows are collective: every rank must (de)register the same sizes in the same order.
  const same = (p: Plan) => p.op === plan.op && p.kind === plan.kind && (plan.kind !== "window" || p.sizes.join() === plan.sizes.join())
  if (plans.every(same)) return
  throw new NcclRegistrationError({
    message: `${what}: the ranks disagree (${plans.map((p, r) => `rank ${r}: ${describePlan(p)}`).join("; ")}); nothing was registered or deregistered`,
    group: group.name,
    failedRanks: [],
  })
}

/** This rank's preparation, or the error that refused it (to be shared with the other ranks before raising it). */
const prepare = <A>(op: Plan["op"], make: () => A): { readonly ready: A; readonly plan?: undefined } | { readonly ready?: undefined; readonly plan: Plan; readonly refusal: unknown } => {
  try {
    return { ready: make() }
  } catch (refusal) {
    return { plan: { op, kind: "any", sizes: [], refused: messageOf(refusal) }, refusal }
  }
}

/**
 * Registers the pool's segments that are not yet registered with `group`, in allocation order.
 * Collective: every rank of the group calls it. A segment registered as a buffer cannot become a
 * window (or back): deregister first.
 */
export const registerMemPool = async (pool: NcclMemPool, group: PoolGroup | string, options: RegistrationOptions = {}): Promise<void> => {
  const member = resolveGroup(group)
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const what = `registering pool "${pool.name}" with group "${member.name}" (rank ${member.rank})`
  const local = prepare("register", () => {
    const bound = communicatorFor(pool, member)
    forgetEndedRegistrations(pool)
    const symmetric = options.symmetric ?? pool.symmetric ?? supports(bound.loaded.version, "windows")
    requireFeature(bound.loaded.version, symmetric ? "windows" : "registration", symmetric ? "registering a pool as NCCL windows" : "registering a pool with a communicator")
    const kind = symmetric ? "window" : "buffer"
    const registered = registrationsOf(pool, member.name)
    const other = [...registered.values()].find((r) => r.kind !== kind)
    if (other !== undefined) {
      throw new NcclRegistrationError({
        message: `${what}: the pool is registered with this group as ${other.kind}s; deregisterMemPool before registering it as ${kind}s`,
        group: member.name,
        failedRanks: [member.rank],
      })
    }
    return { bound, kind, fresh: pool.segments.filter((s) => !registered.has(s.index)) } as const
  })
  if (local.ready === undefined) return agreeOnPlan(member, what, local.plan, local.refusal, timeoutMs)
  const { bound, kind, fresh } = local.ready
  await agreeOnPlan(member, what, { op: "register", kind, sizes: fresh.map((s) => s.byteLength) }, undefined, timeoutMs)
  const steps = fresh.map((s) => registerStep(bound, pool, member.name, s, kind, timeoutMs))
  await apply(bound, pool, member, what, steps, kind === "window", timeoutMs)
}

/**
 * Deregisters every segment of the pool from `group` (windows with the window API), in reverse
 * allocation order. Collective; a failure on any rank registers again what the others deregistered.
 */
export const deregisterMemPool = async (pool: NcclMemPool, group: PoolGroup | string, options: Pick<RegistrationOptions, "timeoutMs"> = {}): Promise<void> => {
  const member = resolveGroup(group)
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const what = `deregistering pool "${pool.name}" from group "${member.name}" (rank ${member.rank})`
  const local = prepare("deregister", () => {
    const bound = communicatorFor(pool, member)
    forgetEndedRegistrations(pool)
    return { bound, registered: registrationsOf(pool, member.name) }
  })
  if (local.ready === undefined) return agreeOnPlan(member, what, local.plan, local.refusal, timeoutMs)
  const { bound, registered } = local.ready
  const entries = [...registered.entries()].sort(([a], [b]) => b - a)
  const windows = entries.some(([, r]) => r.kind === "window")
  const segments = new Map(pool.segments.map((s) => [s.index, s]))
  await agreeOnPlan(
    member,
    what,
    { op: "deregister", kind: windows ? "window" : "any", sizes: entries.map(([i]) => segments.get(i)!.byteLength) },
    undefined,
    timeoutMs,
  )
  const steps = entries.map(([index, registration]): Step => {
    const again = registerStep(bound, pool, member.name, segments.get(index)!, registration.kind, timeoutMs)
    return { label: `deregistering segment ${index}`, apply: () => deregisterOne(bound.loaded, pool, member.name, index, timeoutMs), undo: again.apply }
  })
  await apply(bound, pool, member, what, steps, windows, timeoutMs)
  if (registered.size === 0) pool.registrations.delete(member.name)
}
