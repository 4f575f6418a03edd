/**
 * The driver's half of `group(name).allGather` in actors: members of a group contribute one blob per
 * call, in the same order on every member, and each gets every member's blob by rank. The driver numbers
 * each member's calls itself (control messages from one actor arrive in order), so a member that timed
 * out or failed in round n still lines up with the others in round n + 1.
 */
import { TimeoutError } from "../Errors.js"
import { limitTimer } from "./arguments.js"

export interface GatherReply {
  readonly blobs?: ReadonlyArray<Uint8Array>
  readonly error?: Error
}

interface Round {
  readonly blobs: Array<Uint8Array | undefined>
  readonly replies: Array<((reply: GatherReply) => void) | undefined>
  arrived: number
  failure: Error | undefined
  timer: NodeJS.Timeout | undefined
}

export class GatherRounds {
  private readonly rounds = new Map<number, Round>()
  private readonly nextRound: Array<number>
  private broken: Error | undefined

  constructor(
    private readonly groupName: string,
    private readonly worldSize: number,
  ) {
    this.nextRound = new Array<number>(worldSize).fill(0)
  }

  /** One member's contribution; `reply` is called once, with every blob or with the round's failure. */
  contribute(rank: number, blob: Uint8Array, timeoutMs: number, reply: (reply: GatherReply) => void): void {
    const index = this.nextRound[rank]++
    if (this.broken !== undefined) return reply({ error: this.broken })
    let round = this.rounds.get(index)
    if (round === undefined) {
      round = {
        blobs: new Array(this.worldSize),
        replies: new Array(this.worldSize),
        arrived: 0,
        failure: undefined,
        timer: undefined,
      }
      this.rounds.set(index, round)
      const started = round
      round.timer = limitTimer(timeoutMs, () =>
        this.fail(
          started,
          new TimeoutError({
            message: `allGather round ${index} of group "${this.groupName}" waited over ${timeoutMs} ms for ranks ${this.missing(started).join(", ")}`,
            timeoutMs,
          }),
        ),
      )
    }
    round.arrived++
    if (round.failure !== undefined) {
      reply({ error: round.failure })
    } else {
      round.blobs[rank] = blob
      round.replies[rank] = reply
    }
    if (round.arrived === this.worldSize) {
      clearTimeout(round.timer)
      this.rounds.delete(index)
      if (round.failure === undefined) {
        const blobs = round.blobs as Array<Uint8Array>
        for (const send of round.replies) send!({ blobs })
      }
    }
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
    for (let rank = 0; rank < round.replies.length; rank++) {
      round.replies[rank]?.({ error: round.failure })
      round.replies[rank] = undefined
      round.blobs[rank] = undefined
    }
  }

  private missing(round: Round): Array<number> {
    const ranks: Array<number> = []
    for (let rank = 0; rank < this.worldSize; rank++) if (round.blobs[rank] === undefined) ranks.push(rank)
    return ranks
  }
}
