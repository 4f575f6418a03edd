/**
 * How long the transfers of each call took, as their receivers timed them: the cluster reports every
 * transfer as a `tensorlane.transfer` span through the tracer it was started with, and this tracer
 * keeps those (creating every span as Effect's own tracer does).
 */
import * as Tracer from "effect/Tracer"

export interface TransferClock {
  readonly tracer: Tracer.Tracer
  /** The ms of every transfer reported since the last take, in the order they were reported. */
  readonly take: () => Array<number>
}

/** `spanName`: core's `transferSpanName` (passed in: the bench loads core only once it runs). */
export const makeTransferClock = (spanName: string): TransferClock => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span(options) {
      const span = Tracer.nativeTracer.span(options)
      if (options.name === spanName) spans.push(span)
      return span
    },
  })
  const take = () =>
    spans.splice(0).flatMap((span) => (span.status._tag === "Ended" ? [Number(span.status.endTime - span.status.startTime) / 1e6] : []))
  return { tracer, take }
}
