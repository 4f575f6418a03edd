/**
 * The driver's all-gather rounds alone: each member's calls are numbered in the order they come, a
 * round answers every member once with every blob by rank, or with its failure (a time limit that
 * names the ranks it waited for, a broken group), and a member late to one round lines up with the
 * others in the next.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { MessageTooLargeError, TimeoutError, TransferError } from "../src/Errors.js"
import { MAX_MESSAGE_BYTES } from "../src/Limits.js"
import { type GatherReply, GatherRounds, MAX_BYTES_WAITING, MAX_ROUNDS_WAITING } from "../src/internal/gatherRounds.js"

const blob = (text: string): Uint8Array => new TextEncoder().encode(text)
/** A blob of `bytes` bytes as the rounds see it (they read its length only), without allocating them. */
const sized = (bytes: number): Uint8Array => ({ byteLength: bytes }) as Uint8Array
const text = (reply: GatherReply | undefined): Array<string> | Error | undefined =>
  reply?.error ?? reply?.blobs?.map((b) => new TextDecoder().decode(b))

/** Rounds of a group of `worldSize` members; `contribute` records the replies each call gets. */
const group = (worldSize: number, name = "g") => {
  const rounds = new GatherRounds(name, worldSize)
  const contribute = (rank: number, data: string | Uint8Array, timeoutMs = 10_000) => {
    const call = { got: [] as Array<GatherReply> }
    rounds.contribute(rank, typeof data === "string" ? blob(data) : data, timeoutMs, (reply) => call.got.push(reply))
    return call
  }
  return { rounds, contribute }
}

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe("GatherRounds", () => {
  it("answers every member once with every blob by rank, whatever order they come in", () => {
    const { contribute } = group(3)
    const two = contribute(2, "c")
    const zero = contribute(0, "a")
    expect(two.got).toEqual([])
    const one = contribute(1, "b")
    for (const call of [zero, one, two]) {
      expect(call.got).toHaveLength(1)
      expect(text(call.got[0])).toEqual(["a", "b", "c"])
    }
    // The round's timer went with it.
    expect(vi.getTimerCount()).toBe(0)
  })

  it("numbers each member's calls: a member's second contribution goes to its next round, never twice into one, and rounds complete in order", () => {
    const { contribute } = group(2)
    const first = contribute(0, "r0-a")
    const second = contribute(0, "r1-a")
    const third = contribute(0, "r2-a")
    expect([first.got, second.got, third.got]).toEqual([[], [], []])
    contribute(1, "r0-b")
    expect(text(first.got[0])).toEqual(["r0-a", "r0-b"])
    expect(second.got).toEqual([])
    contribute(1, "r1-b")
    expect(text(second.got[0])).toEqual(["r1-a", "r1-b"])
    contribute(1, "r2-b")
    expect(text(third.got[0])).toEqual(["r2-a", "r2-b"])
    expect([first.got, second.got, third.got].map((got) => got.length)).toEqual([1, 1, 1])
  })

  it("a group of one gathers its own blob at once", () => {
    const { contribute } = group(1)
    expect(text(contribute(0, "solo").got[0])).toEqual(["solo"])
  })

  it("a round over its time limit fails with TimeoutError naming the round, the group, the limit and the missing ranks", () => {
    const { contribute } = group(4, "trainers")
    const calls = [contribute(0, "a", 500), contribute(2, "c", 500)]
    vi.advanceTimersByTime(499)
    expect(calls.map((c) => c.got)).toEqual([[], []])
    vi.advanceTimersByTime(1)
    for (const call of calls) {
      expect(call.got).toHaveLength(1)
      const error = call.got[0].error
      expect(error).toBeInstanceOf(TimeoutError)
      expect(error).toMatchObject({
        timeoutMs: 500,
        message: 'allGather round 0 of group "trainers" waited over 500 ms for ranks 1, 3',
      })
      expect(call.got[0].blobs).toBeUndefined()
    }
  })

  it("the round's limit is its first member's: later members' limits do not extend it", () => {
    const { contribute } = group(3)
    const first = contribute(0, "a", 100)
    const second = contribute(1, "b", 60_000)
    vi.advanceTimersByTime(100)
    expect(first.got[0].error).toBeInstanceOf(TimeoutError)
    expect(second.got[0].error).toBe(first.got[0].error)
    expect(first.got[0].error?.message).toMatch(/for ranks 2$/)
  })

  it("a member late to a timed-out round gets its failure at once, then lines up with the others in the next round", () => {
    const { rounds, contribute } = group(2)
    const early = contribute(0, "r0-a", 100)
    vi.advanceTimersByTime(100)
    const failure = early.got[0].error
    expect(failure).toBeInstanceOf(TimeoutError)
    // Rank 0 has moved on to round 1 before rank 1 arrives for round 0.
    const next = contribute(0, "r1-a", 100)
    const late = contribute(1, "r0-b", 100)
    expect(late.got).toEqual([{ error: failure }])
    expect(next.got).toEqual([])
    const partner = contribute(1, "r1-b", 100)
    expect(text(next.got[0])).toEqual(["r1-a", "r1-b"])
    expect(text(partner.got[0])).toEqual(["r1-a", "r1-b"])
    // Every call was answered exactly once, and nothing is left of either round: no timer, no record.
    expect([early, next, late, partner].map((c) => c.got.length)).toEqual([1, 1, 1, 1])
    vi.advanceTimersByTime(60_000)
    expect([early, next, late, partner].map((c) => c.got.length)).toEqual([1, 1, 1, 1])
    expect(vi.getTimerCount()).toBe(0)
    expect(rounds["rounds"].size).toBe(0)
  })

  it("an unbounded round never times out", () => {
    const { contribute } = group(2)
    const waiting = contribute(0, "a", Infinity)
    expect(vi.getTimerCount()).toBe(0)
    vi.advanceTimersByTime(365 * 24 * 3600 * 1000)
    expect(waiting.got).toEqual([])
    contribute(1, "b", Infinity)
    expect(text(waiting.got[0])).toEqual(["a", "b"])
  })

  it("breakAll fails every round in progress and every later call with its first error, and stops their timers", () => {
    const { rounds, contribute } = group(3)
    const inRound0 = [contribute(0, "r0-a"), contribute(1, "r0-b")]
    const inRound1 = contribute(0, "r1-a")
    const died = new Error("member 2 died")
    rounds.breakAll(died)
    for (const call of [...inRound0, inRound1]) expect(call.got).toEqual([{ error: died }])
    expect(vi.getTimerCount()).toBe(0)
    rounds.breakAll(new Error("group destroyed"))
    const after = contribute(2, "r0-c")
    expect(after.got).toEqual([{ error: died }])
    for (const call of [...inRound0, inRound1]) expect(call.got).toHaveLength(1)
  })

  it("breakAll after a round timed out does not answer its members a second time", () => {
    const { rounds, contribute } = group(2)
    const early = contribute(0, "a", 100)
    vi.advanceTimersByTime(100)
    rounds.breakAll(new Error("gone"))
    expect(early.got).toHaveLength(1)
    expect(early.got[0].error).toBeInstanceOf(TimeoutError)
  })

  it("a round whose blobs are more than a message carries fails at once on every member, and the next round works", () => {
    const { rounds, contribute } = group(3)
    const first = contribute(0, sized(MAX_MESSAGE_BYTES / 2))
    expect(first.got).toEqual([])
    const second = contribute(1, sized(MAX_MESSAGE_BYTES / 2 + 1))
    for (const call of [first, second]) {
      expect(call.got).toHaveLength(1)
      expect(call.got[0].error).toBeInstanceOf(MessageTooLargeError)
      expect(call.got[0].error).toMatchObject({ bytes: MAX_MESSAGE_BYTES + 1, limit: MAX_MESSAGE_BYTES })
    }
    expect(rounds["bytesWaiting"]).toBe(0)
    const late = contribute(2, "c")
    expect(late.got[0].error).toBe(first.got[0].error)
    const next = [contribute(0, "a"), contribute(1, "b"), contribute(2, "c")]
    for (const call of next) expect(text(call.got[0])).toEqual(["a", "b", "c"])
    expect(vi.getTimerCount()).toBe(0)
  })

  it("a member that runs MAX_ROUNDS_WAITING rounds ahead breaks the group's all-gather, naming the ranks behind", () => {
    const { rounds, contribute } = group(3, "trainers")
    const ahead = Array.from({ length: MAX_ROUNDS_WAITING }, (_, i) => contribute(0, `r${i}`))
    expect(ahead.every((call) => call.got.length === 0)).toBe(true)
    const over = contribute(0, "one more")
    const error = over.got[0].error
    expect(error).toBeInstanceOf(TransferError)
    expect(error?.message).toBe(
      `allGather of group "trainers" broke: ${MAX_ROUNDS_WAITING} rounds waited for ranks 1, 2 (at most ${MAX_ROUNDS_WAITING} rounds and ` +
        `${MAX_BYTES_WAITING} bytes may wait); await a member's allGather calls before it starts many more, then destroy the group and create it again`,
    )
    for (const call of ahead) expect(call.got).toEqual([{ error }])
    expect(contribute(1, "late").got).toEqual([{ error }])
    expect(vi.getTimerCount()).toBe(0)
    expect(rounds["rounds"].size).toBe(0)
  })

  it("blobs of rounds waiting over MAX_BYTES_WAITING break the group's all-gather; a blob that completes its round never does", () => {
    // Blobs that two by two fit a message, as many as fill MAX_BYTES_WAITING.
    const half = MAX_MESSAGE_BYTES / 2
    const fill = MAX_BYTES_WAITING / half
    const { rounds, contribute } = group(2)
    const ahead = Array.from({ length: fill }, () => contribute(0, sized(half)))
    expect(rounds["bytesWaiting"]).toBe(MAX_BYTES_WAITING)
    // The round it completes lets its bytes go.
    const completing = contribute(1, sized(half))
    expect(completing.got[0].blobs).toHaveLength(2)
    expect(rounds["bytesWaiting"]).toBe(MAX_BYTES_WAITING - half)
    const more = contribute(0, sized(half))
    expect(more.got).toEqual([])
    const over = contribute(0, sized(1))
    const error = over.got[0].error
    expect(error).toBeInstanceOf(TransferError)
    expect(error?.message).toMatch(/the blobs of its waiting rounds would hold \d+ bytes for ranks 1 \(/)
    for (const call of [...ahead.slice(1), more]) expect(call.got).toEqual([{ error }])
    expect(rounds["bytesWaiting"]).toBe(0)
  })

  it("names the ranks behind after the oldest round failed, not the ranks whose blobs that failure let go", () => {
    const { contribute } = group(3, "g")
    contribute(0, "r0-a", 100)
    contribute(1, "r0-b", 100)
    vi.advanceTimersByTime(100)
    for (let i = 1; i < MAX_ROUNDS_WAITING; i++) contribute(0, `r${i}`, Infinity)
    const over = contribute(0, "one more")
    expect(over.got[0].error?.message).toMatch(/^allGather of group "g" broke: 1024 rounds waited for ranks 2 \(/)
  })
})
