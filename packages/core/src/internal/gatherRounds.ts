/**
 * The driver's half of `group(name).allGather` in actors: members of a group contribute one blob per
 * call, in the same order on every member, and each gets every member's blob by rank. The driver numbers
 * each member's calls itself (control messages from one actor arrive in order), so a member that timed
 * out or failed in round n still lines up with the others in round n + 1.
 */
import { TimeoutError, TransferError } from "../Errors.js"
import { MAX_MESSAGE_BYTES } from "../Limits.js"
import { limitTimer } from "./arguments.js"
import { tooLarge } from "./frame.js"

/**
 * Rounds of one group that may wait for members at once, and the bytes of the blobs they may hold: a
 * member that runs ahead of the others (allGathers started and not awaited) holds a round and its blob
 * per call until the others come. Past either, the group's all-gather breaks (see GatherRounds).
 */
export const MAX_ROUNDS_WAITING = 1024
export const MAX_BYTES_WAITING = 4 * MAX_MESSAGE_BYTES

export interface GatherReply {
  readonly blobs?: ReadonlyArray<Uint8Array>
  readonly error?: Error
}

interface Round {
  readonly blobs: Array<Uint8Array | undefined>
  /** The ranks that came, kept when a failure lets their blobs go. */
  readonly came: Array<boolean>
  /** The bytes of the blobs it holds. */
  bytes: number
  readonly replies: Array<((reply: GatherReply) => void) | undefined>
  arrived: number
  failure: Error | undefined
  timer: NodeJS.Timeout | undefined
}

export class GatherRounds {
  private readonly rounds = new Map<number, Round>()
  private readonly nextRound: Array<number>
  private broken: Error | undefined
  /** The bytes of the blobs all rounds hold. */
  private bytesWaiting = 0

  constructor(
    private readonly groupName: string,
    private readonly worldSize: number,
  ) {
    this.nextRound = new Array<number>(worldSize).fill(0)
  }

  /**
   * One member's contribution; `reply` is called once, with every blob or with the round's failure. A
   * round whose blobs together are more than its answer can carry fails at once (MessageTooLargeError,
   * as its answer would), and the next round works. A contribution that would make more than
   * MAX_ROUNDS_WAITING rounds, or MAX_BYTES_WAITING bytes of blobs, wait at once breaks the group's
   * all-gather: its rounds and every later call fail, as when a member dies, since refusing one call
   * alone would leave that member a round behind the others for good.
   */
  contribute(rank: number, blob: Uint8Array, timeoutMs: number, reply: (reply: GatherReply) => void): void {
    const index = this.nextRound[rank]++
    if (this.broken !== undefined) return reply({ error: this.broken })
    let round = this.rounds.get(index)
    if (round === undefined) {
      if (this.rounds.size >= MAX_ROUNDS_WAITING) return this.overrun(reply, `${MAX_ROUNDS_WAITING} rounds waited`)
      round = this.startRound(index, timeoutMs)
    }
    const completes = round.arrived + 1 === this.worldSize
    if (!completes && round.failure === undefined && this.bytesWaiting + blob.byteLength > MAX_BYTES_WAITING) {
      return this.overrun(reply, `the blobs of its waiting rounds would hold ${this.bytesWaiting + blob.byteLength} bytes`)
    }
    round.arrived++
    round.came[rank] = true
    if (round.failure !== undefined) {
      reply({ error: round.failure })
    } else {
      round.blobs[rank] = blob
      round.replies[rank] = reply
      round.bytes += blob.byteLength
      this.bytesWaiting += blob.byteLength
      if (round.bytes > MAX_MESSAGE_BYTES) {
        this.fail(round, tooLarge(`the answer (AllGathered) to allGather round ${index} of group "${this.groupName}"`, round.bytes, MAX_MESSAGE_BYTES))
      }
    }
    if (completes) {
      clearTimeout(round.timer)
      this.rounds.delete(index)
      if (round.failure === undefined) {
        const blobs = round.blobs as Array<Uint8Array>
        this.bytesWaiting -= round.bytes
        for (const send of round.replies) send!({ blobs })
      }
    }
  }

  private startRound(index: number, timeoutMs: number): Round {
    const round: Round = {
      blobs: new Array(this.worldSize),
      came: new Array<boolean>(this.worldSize).fill(false),
      bytes: 0,
      replies: new Array(this.worldSize),
      arrived: 0,
      failure: undefined,
      timer: undefined,
    }
    this.rounds.set(index, round)
    round.timer = limitTimer(timeoutMs, () =>
      this.fail(
        round,
        new TimeoutError({
          message: `allGather round ${index} of group "${this.groupName}" waited over ${timeoutMs} ms for ranks ${this.missing(round).join(", ")}`,
          timeoutMs,
        }),
      ),
    )
    return round
  }

  /** Members ran too far ahead of the others (see contribute): the group's all-gather breaks. */
  private overrun(reply: (reply: GatherReply) => void, what: string): void {
    const [oldest] = this.rounds.values()
    const behind = oldest === undefined ? "" : ` for ranks ${this.missing(oldest).join(", ")}`
    const error = new TransferError({
      message:
        `allGather of group "${this.groupName}" broke: ${what}${behind} (at most ${MAX_ROUNDS_WAITING} rounds and ` +
        `${MAX_BYTES_WAITING} bytes may wait); await a member's allGather calls before it starts many more, then destroy the ` +
        `group and create it again`,
      transport: "control",
    })
    this.breakAll(error)
    reply({ error })
  }

  /** Fails every round in progress and every later call: a member died or the group is gone. */
  breakAll(error: Error): void {
    this.broken ??= error
    for (const round of this.rounds.values()) {
      clearTimeout(round.timer)
      this.fail(round, error)
    }
    this.rounds.clear()
  }

  private fail(round: Round, error: Error): void {
    round.failure ??= error
    this.bytesWaiting -= round.bytes
    round.bytes = 0
    for (let rank = 0; rank < round.replies.length; rank++) {
      round.replies[rank]?.({ error: round.failure })
      round.replies[rank] = undefined
      round.blobs[rank] = undefined
    }
  }

  private missing(round: Round): Array<number> {
    const ranks: Array<number> = []
    for (let rank = 0; rank < this.worldSize; rank++) if (!round.came[rank]) ranks.push(rank)
    return ranks
  }
}
