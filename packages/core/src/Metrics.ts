/**
 * Transfer metrics, as Effect metrics: bytes and latency per transport and pair of peers. The driver
 * records every transfer of the cluster (actors report theirs with each call's result); each process
 * also opens a `tensorlane.transfer` span around the transfers it receives.
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
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

export const recordTransfer = (stat: TransferStat): void => {
  const attributes = { transport: stat.transport, from: stat.from, to: stat.to }
  Effect.runSync(
    Effect.all([
      Metric.update(Metric.withAttributes(transferBytes, attributes), stat.bytes),
      Metric.update(Metric.withAttributes(transferCount, attributes), 1),
      Metric.update(Metric.withAttributes(transferLatency, attributes), stat.ms),
    ]),
  )
}
