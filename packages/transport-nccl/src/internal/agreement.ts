/**
 * All-or-nothing steps across the ranks of a group: each rank applies its steps in order, the
 * ranks exchange their outcomes over the control plane (group.allGather), and when any rank
 * failed every rank undoes what it applied, in reverse, and raises the same error. No rank is left
 * registered where another is not. agreeOnOutcome, the exchange itself, is public: symmetric-mem's
 * nccl-window backend agrees on its allocations and windows with it.
 *
 * Collective steps (NCCL windows) go in lockstep instead (runLockstep): a rank that fails one leaves
 * the others waiting inside that very call, which only a timeout and ncclCommAbort end, and an undo
 * is a collective call as well. So the ranks compare outcomes after every step; they undo together
 * only when every rank failed the same step with a healthy communicator, and otherwise every rank
 * aborts its communicator (the group must be destroyed and created again).
 */
import type { GroupMember } from "@tensorlane/core"
import { NcclRegistrationError } from "../Errors.js"

/** What the registration logic needs of a group: its name, this rank and the control-plane gather. */
export type PoolGroup = Pick<GroupMember, "name" | "rank" | "worldSize" | "allGather">

export interface Step {
  readonly label: string
  readonly apply: () => Promise<void>
  readonly undo: () => Promise<void>
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Every rank's `value` (JSON), by rank. */
export const gatherJson = async <A>(group: PoolGroup, value: A, timeoutMs: number): Promise<ReadonlyArray<A>> => {
  const blobs = await group.allGather(encoder.encode(JSON.stringify(value)), { timeoutMs })
  return blobs.map((b) => JSON.parse(decoder.decode(b)) as A)
}

interface Outcome {
  readonly ok: boolean
  readonly message: string
}

/** What failed on this rank: a description for the other ranks, and the error itself. */
export interface LocalFailure {
  readonly message: string
  readonly error: unknown
}

const undoAll = async (done: ReadonlyArray<Step>): Promise<Array<string>> => {
  const failures: Array<string> = []
  for (const step of [...done].reverse()) {
    try {
      await step.undo()
    } catch (error) {
      failures.push(`undoing ${step.label}: ${messageOf(error)}`)
    }
  }
  return failures
}

/**
 * Every rank states whether its part of `what` failed; when any rank did, every rank runs
 * `rollback` (which returns what it could not undo) and raises NcclRegistrationError naming the
 * failed ranks, or, with `ownErrors`, a rank that failed raises its own error instead. Collective.
 */
export const agreeOnOutcome = async (
  group: PoolGroup,
  what: string,
  failure: LocalFailure | undefined,
  rollback: () => Promise<ReadonlyArray<string>>,
  options: { readonly timeoutMs: number; readonly ownErrors?: boolean },
): Promise<void> => {
  let outcomes: ReadonlyArray<Outcome>
  try {
    outcomes = await gatherJson<Outcome>(group, { ok: failure === undefined, message: failure?.message ?? "" }, options.timeoutMs)
  } catch (error) {
    const undoFailures = await rollback()
    if (failure !== undefined && options.ownErrors === true) throw failure.error
    throw new NcclRegistrationError({
      message: `${what}: the ranks could not compare outcomes (${messageOf(error)}); this rank rolled back${undoFailures.length > 0 ? `, except: ${undoFailures.join("; ")}` : ""}`,
      group: group.name,
      failedRanks: failure === undefined ? [] : [group.rank],
    })
  }
  const failedRanks = outcomes.flatMap((o, rank) => (o.ok ? [] : [rank]))
  if (failedRanks.length === 0) return
  const undoFailures = await rollback()
  if (failure !== undefined && options.ownErrors === true) throw failure.error
  throw new NcclRegistrationError({
    message: `${what} failed on rank ${failedRanks.map((r) => `${r} (${outcomes[r].message})`).join(", rank ")}; every rank rolled back what this call did${
      undoFailures.length > 0 ? `, except on rank ${group.rank}: ${undoFailures.join("; ")}` : ""
    }`,
    group: group.name,
    failedRanks,
  })
}

export const runAgreed = async (group: PoolGroup, what: string, steps: ReadonlyArray<Step>, timeoutMs: number): Promise<void> => {
  const done: Array<Step> = []
  let failure: LocalFailure | undefined
  for (const step of steps) {
    try {
      await step.apply()
      done.push(step)
    } catch (error) {
      failure = { message: `${step.label}: ${messageOf(error)}`, error }
      break
    }
  }
  await agreeOnOutcome(group, what, failure, () => undoAll(done), { timeoutMs })
}

/** A rank's communicator as lockstep steps need it. */
export interface Collective {
  /** Why this rank's communicator is broken (aborted, timed out, gone), else undefined. */
  readonly broken: () => string | undefined
  /** Aborts this rank's communicator; NCCL ends its registrations and windows with it. */
  readonly abort: (reason: string) => Promise<void>
}

interface StepOutcome extends Outcome {
  readonly broken: boolean
}

const abortAll = async (group: PoolGroup, collective: Collective, reason: string, failedRanks: Array<number>): Promise<never> => {
  const aborted = await collective.abort(reason).then(
    () => "",
    (error: unknown) => ` (aborting failed: ${messageOf(error)})`,
  )
  throw new NcclRegistrationError({
    message: `${reason}. Window registration is collective and the ranks can no longer agree, so each rank aborted its communicator of group "${group.name}" (ncclCommAbort)${aborted}: destroy the group and create it again`,
    group: group.name,
    failedRanks,
  })
}

export const runLockstep = async (group: PoolGroup, what: string, steps: ReadonlyArray<Step>, timeoutMs: number, collective: Collective): Promise<void> => {
  const done: Array<Step> = []
  for (const step of steps) {
    let failure: string | undefined
    try {
      await step.apply()
      done.push(step)
    } catch (error) {
      failure = `${step.label}: ${messageOf(error)}`
    }
    let outcomes: ReadonlyArray<StepOutcome>
    try {
      // Twice the step's limit: a rank that failed at once waits here for peers held inside the collective call until theirs.
      outcomes = await gatherJson<StepOutcome>(group, { ok: failure === undefined, message: failure ?? "", broken: collective.broken() !== undefined }, 2 * timeoutMs)
    } catch (error) {
      return abortAll(group, collective, `${what}: the ranks could not compare outcomes after ${step.label} (${messageOf(error)})`, failure === undefined ? [] : [group.rank])
    }
    const failedRanks = outcomes.flatMap((o, rank) => (o.ok ? [] : [rank]))
    if (failedRanks.length === 0) continue
    const reason = `${what} failed on rank ${failedRanks.map((r) => `${r} (${outcomes[r].message})`).join(", rank ")}`
    if (failedRanks.length < outcomes.length || outcomes.some((o) => o.broken)) return abortAll(group, collective, reason, failedRanks)
    const undoFailures = await undoAll(done)
    if (undoFailures.length > 0) return abortAll(group, collective, `${reason}; undoing on rank ${group.rank}: ${undoFailures.join("; ")}`, failedRanks)
    throw new NcclRegistrationError({ message: `${reason}; every rank rolled back what this call did`, group: group.name, failedRanks })
  }
}
