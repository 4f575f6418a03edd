/**
 * The actors of the benchmark's scenario: the producer returns n bytes of float32 ones, made anew
 * (`make`) or the ones it keeps (`held`), the consumer their count. The transport is chosen per call with .options({ tensorTransport }). Across hosts,
 * they also measure a raw TCP stream from the producer's host to the consumer's. Actor processes
 * import this module (dist/internal/BenchActors.js) by its URL.
 */
import { defineActor, Tensor } from "@tensorlane/core"
import { startTcpSink, tcpStreamMs } from "../Limits.js"

/** n bytes of float32 ones. */
const ones = (n: number): Tensor => Tensor.full([n / 4], 1, { dtype: "float32" })

export const Producer = defineActor(import.meta.url, "Producer", {
  init: () => ({ kept: new Map<number, Tensor>() }),
  methods: {
    make: (_state, n: number) => ones(n),
    /** The n bytes of ones this actor keeps, made at the first call of the size: as an actor hands out its weights. */
    held: (state, n: number) => {
      const kept = state.kept.get(n) ?? ones(n)
      state.kept.set(n, kept)
      return kept
    },
    /** Drops the kept tensors, so that their blocks go back to the host-memory cache for the cells after. */
    letGo: (state) => state.kept.clear(),
    /** The TCP limit: a stream of n-byte messages to the consumer's sink at host:port; median ms. */
    tcpStreamMs: (_state, host: string, port: number, n: number, repeats: number, warmups: number) => tcpStreamMs(host, port, n, repeats, warmups),
  },
})

export const Consumer = defineActor(import.meta.url, "Consumer", {
  init: () => ({ closeSink: () => {} }),
  methods: {
    numel: (_state, t: Tensor) => t.numel,
    /** Starts a TCP sink of n-byte messages on the host's address (the last one ends); its port. */
    tcpSink: async (state, host: string, n: number) => {
      state.closeSink()
      const sink = await startTcpSink(n, host)
      state.closeSink = sink.close
      return sink.port
    },
  },
})
