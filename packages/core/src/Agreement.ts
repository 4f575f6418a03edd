/**
 * Agreement across the ranks of a group, over the control plane's gather (`group(name).allGather`),
 * for packages whose collective calls must leave every rank in the same state.
 *
 * - gatherJson: every rank's statement, by rank; an unreadable one is a ProtocolError.
 * - agreeOnOutcome / runAgreed: all-or-nothing local steps. Each rank applies its steps in order,
 *   the ranks exchange their outcomes, and when any rank failed every rank undoes what it applied,
 *   in reverse, and raises the same error (the caller's typed error, naming the failed ranks).
 * - runLockstep: collective steps (NCCL windows, say). A rank that fails one leaves the others
 *   waiting inside that very call, which only a timeout and an abort of the communicator end, and an
 *   undo is a collective call as well. So the ranks compare outcomes after every step; they undo
 *   together only when every rank failed the same step with a healthy communicator, and otherwise
 *   every rank aborts its communicator (the group must be destroyed and created again).
 */
import { ProtocolError } from "./Errors.js"
import type { GroupMember } from "./InActor.js"

/** What an agreement needs of a group: its name, this rank and the control-plane gather. */
export type AgreementGroup = Pick<GroupMember, "name" | "rank" | "worldSize" | "allGather">

/** The fields of the error every rank raises when the ranks did not all succeed. */
export interface AgreementFailure {
  readonly message: string
  readonly group: string
  /** Ranks whose own part failed (empty when the ranks could not even compare). */
  readonly failedRanks: ReadonlyArray<number>
}

export interface AgreementOptions {
  /** Limit of each exchange between the ranks. */
  readonly timeoutMs: number
  /** Makes the caller's typed error (NcclRegistrationError, say) from what failed. */
  readonly error: (failure: AgreementFailure) => Error
}

export interface Step {
  readonly label: string
  readonly apply: () => Promise<void>
  readonly undo: () => Promise<void>
}

/** What failed on this rank: a description for the other ranks, and the error itself. */
export interface LocalFailure {
  readonly message: string
  readonly error: unknown
}

/** A rank's communicator as lockstep steps need it. */
export interface Collective {
  /** Why this rank's communicator is broken (aborted, timed out, gone), else undefined. */
  readonly broken: () => string | undefined
  /** Aborts this rank's communicator, which ends what was registered with it. */
  readonly abort: (reason: string) => Promise<void>
  /** Names the abort in the error, e.g. `its communicator of group "g" (ncclCommAbort)`. */
  readonly aborted: string
}

export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Every rank's `value` (JSON), by rank. A statement that does not parse, or that `check` refuses,
 * is a ProtocolError naming its rank.
 */
export const gatherJson = async <A>(
  group: Pick<AgreementGroup, "name" | "allGather">,
  value: A,
  options: { readonly timeoutMs?: number; readonly check?: (value: unknown) => boolean },
): Promise<ReadonlyArray<A>> => {
  const blobs = await group.allGather(encoder.encode(JSON.stringify(value)), { timeoutMs: options.timeoutMs })
  return blobs.map((blob, rank) => {
    let parsed: unknown
    try {
      parsed = JSON.parse(decoder.decode(blob))
    } catch {
      parsed = undefined
    }
    if (parsed === undefined || (options.check !== undefined && !options.check(parsed))) {
      throw new ProtocolError({ message: `rank ${rank} of group "${group.name}" sent an unreadable statement` })
    }
    return parsed as A
  })
}

interface Outcome {
  readonly ok: boolean
  readonly message: string
}

const isOutcome = (value: unknown): boolean =>
  typeof value === "object" && value !== null && typeof (value as Outcome).ok === "boolean" && typeof (value as Outcome).message === "string"

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
 * `rollback` (which returns what it could not undo) and raises `options.error` naming the failed
 * ranks, or, with `ownErrors`, a rank that failed raises its own error instead. Collective.
 */
export const agreeOnOutcome = async (
  group: AgreementGroup,
  what: string,
  failure: LocalFailure | undefined,
  rollback: () => Promise<ReadonlyArray<string>>,
  options: AgreementOptions & { readonly ownErrors?: boolean },
): Promise<void> => {
  let outcomes: ReadonlyArray<Outcome>
  try {
    outcomes = await gatherJson<Outcome>(group, { ok: failure === undefined, message: failure?.message ?? "" }, { timeoutMs: options.timeoutMs, check: isOutcome })
  } catch (error) {
    const undoFailures = await rollback()
    if (failure !== undefined && options.ownErrors === true) throw failure.error
    throw options.error({
      message: `${what}: the ranks could not compare outcomes (${messageOf(error)}); this rank rolled back${undoFailures.length > 0 ? `, except: ${undoFailures.join("; ")}` : ""}`,
      group: group.name,
      failedRanks: failure === undefined ? [] : [group.rank],
    })
  }
  const failedRanks = outcomes.flatMap((o, rank) => (o.ok ? [] : [rank]))
  if (failedRanks.length === 0) return
  const undoFailures = await rollback()
  if (failure !== undefined && options.ownErrors === true) throw failure.error
  throw options.error({
    message: `${what} failed on rank ${failedRanks.map((r) => `${r} (${outcomes[r].message})`).join(", rank ")}; every rank rolled back what this call did${
      undoFailures.length > 0 ? `, except on rank ${group.rank}: ${undoFailures.join("; ")}` : ""
    }`,
    group: group.name,
    failedRanks,
  })
}

/** Applies `steps` in order on every rank, all or nothing (agreeOnOutcome). Collective. */
export const runAgreed = async (group: AgreementGroup, what: string, steps: ReadonlyArray<Step>, options: AgreementOptions): Promise<void> => {
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
  await agreeOnOutcome(group, what, failure, () => undoAll(done), options)
}

interface StepOutcome extends Outcome {
  readonly broken: boolean
}

const isStepOutcome = (value: unknown): boolean => isOutcome(value) && typeof (value as StepOutcome).broken === "boolean"

const abortAll = async (group: AgreementGroup, collective: Collective, reason: string, failedRanks: Array<number>, options: AgreementOptions): Promise<never> => {
  const aborted = await collective.abort(reason).then(
    () => "",
    (error: unknown) => ` (aborting failed: ${messageOf(error)})`,
  )
  throw options.error({
    message: `${reason}. The steps are collective calls and the ranks can no longer agree, so each rank aborted ${collective.aborted}${aborted}: destroy the group and create it again`,
    group: group.name,
    failedRanks,
  })
}

/** Applies collective `steps` on every rank, comparing outcomes after each one (see the header). Collective. */
export const runLockstep = async (group: AgreementGroup, what: string, steps: ReadonlyArray<Step>, collective: Collective, options: AgreementOptions): Promise<void> => {
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
      outcomes = await gatherJson<StepOutcome>(
        group,
        { ok: failure === undefined, message: failure ?? "", broken: collective.broken() !== undefined },
        { timeoutMs: 2 * options.timeoutMs, check: isStepOutcome },
      )
    } catch (error) {
      return abortAll(group, collective, `${what}: the ranks could not compare outcomes after ${step.label} (${messageOf(error)})`, failure === undefined ? [] : [group.rank], options)
    }
    const failedRanks = outcomes.flatMap((o, rank) => (o.ok ? [] : [rank]))
    if (failedRanks.length === 0) continue
    const reason = `${what} failed on rank ${failedRanks.map((r) => `${r} (${outcomes[r].message})`).join(", rank ")}`
    if (failedRanks.length < outcomes.length || outcomes.some((o) => o.broken)) return abortAll(group, collective, reason, failedRanks, options)
    const undoFailures = await undoAll(done)
    if (undoFailures.length > 0) return abortAll(group, collective, `${reason}; undoing on rank ${group.rank}: ${undoFailures.join("; ")}`, failedRanks, options)
    throw options.error({ message: `${reason}; every rank rolled back what this call did`, group: group.name, failedRanks })
  }
}
