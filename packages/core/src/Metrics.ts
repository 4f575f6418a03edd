/**
 * Transfer metrics and spans: bytes and latency per transport and pair of peers as Effect metrics,
 * and a `tensorlane.transfer` span per transfer. The driver records every transfer of the cluster
 * (actors report theirs with each call's result), each span over the transfer's own time in the
 * process that received it.
 */
import * as Context from "effect/Context"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import type { TransferStat } from "./internal/messages.js"

export const transferBytes = Metric.counter("tensorlane_transfer_bytes", {
  description: "bytes moved by tensor transfers",
})

export const transferCount = Metric.counter("tensorlane_transfers", {
  description: "completed tensor transfers",
})

export const transferLatency = Metric.histogram("tensorlane_transfer_latency_ms", {
  description: "time from the start of a receive to its completion, in milliseconds",
  boundaries: Metric.exponentialBoundaries({ start: 0.05, factor: 2, count: 20 }),
})

export type { TransferStat }

/** The name of the span each transfer is reported as, for a tracer that picks them out. */
export const transferSpanName = "tensorlane.transfer"

/** Each peer pair's series, made once: building them on every transfer cost more than the updates. */
const series = new Map<string, readonly [Metric.Metric<number, unknown>, Metric.Metric<number, unknown>, Metric.Metric<number, unknown>]>()

const seriesOf = (stat: TransferStat) => {
  const key = `${stat.transport}\0${stat.from}\0${stat.to}`
  let found = series.get(key)
  if (found === undefined) {
    const attributes = { transport: stat.transport, from: stat.from, to: stat.to }
    found = [Metric.withAttributes(transferBytes, attributes), Metric.withAttributes(transferCount, attributes), Metric.withAttributes(transferLatency, attributes)]
    series.set(key, found)
  }
  return found
}

const defaultServices = Context.empty()

const nanos = (epochMs: number): bigint => BigInt(Math.round(epochMs * 1e6))

/**
 * Records a completed transfer: the metrics into the default registry (what `Metric.snapshot` reads
 * without a registry provided), directly, since running an Effect for three updates costs far more
 * than the updates; and a `tensorlane.transfer` span through `tracer` (Effect's own when none is
 * given), timed as the receiver timed the transfer.
 */
export const recordTransfer = (stat: TransferStat, tracer: Tracer.Tracer = Tracer.nativeTracer): void => {
  const [bytes, count, latency] = seriesOf(stat)
  bytes.updateUnsafe(stat.bytes, defaultServices)
  count.updateUnsafe(1, defaultServices)
  latency.updateUnsafe(stat.ms, defaultServices)
  const span = tracer.span({
    name: transferSpanName,
    parent: Option.none(),
    annotations: Context.empty(),
    links: [],
    startTime: nanos(stat.startedAt),
    kind: "internal",
    root: true,
    sampled: true,
  })
  span.attribute("transport", stat.transport)
  span.attribute("from", stat.from)
  span.attribute("to", stat.to)
  span.attribute("objectId", stat.objectId)
  span.attribute("bytes", stat.bytes)
  span.end(nanos(stat.startedAt + stat.ms), Exit.void)
}
