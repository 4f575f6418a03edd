/**
 * recordTransfer alone: what a transfer adds to Effect's default metric registry (read through
 * `Metric.snapshot`, as a user reads it) and the span it hands to a tracer. Each test names its own
 * transport, so that the series of one test are not another's.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { describe, expect, it } from "vitest"
import { type TransferStat, recordTransfer, transferSpanName } from "../src/Metrics.js"

const stat = (fields: Partial<TransferStat> & { transport: string }): TransferStat => ({
  objectId: "Worker-0.1",
  from: "Worker-0",
  to: "Worker-1",
  bytes: 4096,
  startedAt: 1_700_000_000_000.25,
  ms: 1.5,
  ...fields,
})

/** Each tensorlane series of one transport in the default registry, by metric id and peers. */
const seriesOf = async (transport: string) => {
  const snapshots = await Effect.runPromise(Metric.snapshot)
  return snapshots
    .filter((s) => s.id.startsWith("tensorlane_") && s.attributes?.transport === transport)
    .map((s) => ({ id: s.id, type: s.type, attributes: s.attributes, state: s.state }))
    .sort((a, b) => `${a.id}${a.attributes?.from}${a.attributes?.to}`.localeCompare(`${b.id}${b.attributes?.from}${b.attributes?.to}`))
}

/** A tracer that keeps every span it makes. */
const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span(options) {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    },
  })
  return { tracer, spans }
}

describe("recordTransfer", () => {
  it("adds the bytes, one transfer and its latency to the series of its transport and pair of peers", async () => {
    const { tracer } = recordingTracer()
    recordTransfer(stat({ transport: "t-one", bytes: 1000, ms: 0.07 }), tracer)
    recordTransfer(stat({ transport: "t-one", bytes: 24, ms: 3 }), tracer)
    const peers = { transport: "t-one", from: "Worker-0", to: "Worker-1" }
    const series = await seriesOf("t-one")
    expect(series.map(({ id, type, attributes }) => ({ id, type, attributes }))).toEqual([
      { id: "tensorlane_transfer_bytes", type: "Counter", attributes: peers },
      { id: "tensorlane_transfer_latency_ms", type: "Histogram", attributes: peers },
      { id: "tensorlane_transfers", type: "Counter", attributes: peers },
    ])
    const [bytes, latency, count] = series.map((s) => s.state as never)
    expect(bytes).toMatchObject({ count: 1024 })
    expect(count).toMatchObject({ count: 2 })
    const histogram = latency as Metric.HistogramState
    expect(histogram).toMatchObject({ count: 2, min: 0.07, max: 3, sum: 3.07 })
    // Buckets are cumulative, from 0.05 ms doubling: 0.07 falls in the one up to 0.1, 3 in the one up to 3.2.
    const upTo = (boundary: number) => histogram.buckets.find(([b]) => Math.abs(b - boundary) < 1e-9)?.[1]
    expect([upTo(0.05), upTo(0.1), upTo(1.6), upTo(3.2)]).toEqual([0, 1, 1, 2])
  })

  it("keeps each pair of peers in a series of its own", async () => {
    const { tracer } = recordingTracer()
    recordTransfer(stat({ transport: "t-pairs", from: "A-0", to: "B-0", bytes: 10 }), tracer)
    recordTransfer(stat({ transport: "t-pairs", from: "B-0", to: "A-0", bytes: 20 }), tracer)
    recordTransfer(stat({ transport: "t-pairs", from: "A-0", to: "C-0", bytes: 5 }), tracer)
    recordTransfer(stat({ transport: "t-pairs", from: "A-0", to: "B-0", bytes: 30 }), tracer)
    const bytes = (await seriesOf("t-pairs"))
      .filter((s) => s.id === "tensorlane_transfer_bytes")
      .map((s) => [s.attributes?.from, s.attributes?.to, (s.state as Metric.CounterState<number>).count])
    expect(bytes).toEqual([
      ["A-0", "B-0", 40],
      ["A-0", "C-0", 5],
      ["B-0", "A-0", 20],
    ])
  })

  it("hands the tracer one root span named tensorlane.transfer, timed as the receiver timed it, with the transfer's attributes", () => {
    const { tracer, spans } = recordingTracer()
    recordTransfer(stat({ transport: "t-span", objectId: "Worker-2.9", from: "Worker-2", to: "driver", bytes: 512, startedAt: 1_700_000_000_000.25, ms: 2.5 }), tracer)
    expect(spans).toHaveLength(1)
    const [span] = spans
    expect(span.name).toBe(transferSpanName)
    expect(transferSpanName).toBe("tensorlane.transfer")
    expect(Option.isNone(span.parent)).toBe(true)
    expect([span.kind, span.sampled]).toEqual(["internal", true])
    expect(Object.fromEntries(span.attributes)).toEqual({
      transport: "t-span",
      from: "Worker-2",
      to: "driver",
      objectId: "Worker-2.9",
      bytes: 512,
    })
    expect(span.status._tag).toBe("Ended")
    const status = span.status as Extract<Tracer.SpanStatus, { _tag: "Ended" }>
    // In nanoseconds since the epoch; a double holds them to within a microsecond.
    const nanosOff = (actual: bigint, expected: bigint) => Math.abs(Number(actual - expected))
    expect(nanosOff(status.startTime, 1_700_000_000_000_250_000n)).toBeLessThan(1_000)
    expect(nanosOff(status.endTime, 1_700_000_000_002_750_000n)).toBeLessThan(1_000)
    expect(Exit.isSuccess(status.exit)).toBe(true)
  })

  it("without a tracer, records its metrics all the same", async () => {
    recordTransfer(stat({ transport: "t-native", bytes: 7 }))
    const series = await seriesOf("t-native")
    expect(series.find((s) => s.id === "tensorlane_transfer_bytes")?.state).toMatchObject({ count: 7 })
  })
})
