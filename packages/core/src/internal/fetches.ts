/**
 * The object-store's consumer side, on the thread that needs the object (its main thread, as for
 * the transports that work on any thread): an object's tensors fetched from its producer's agent
 * over the control plane, the reply's body read straight into the receiving tensors.
 */
import { loadClusterConfig, tlsOptionsFor } from "../ClusterConfig.js"
import { ProtocolError, TransferError } from "../Errors.js"
import type { Tensor } from "../Tensor.js"
import { type Connection, type TlsClient, connect } from "./connection.js"
import type { Frame } from "./frame.js"
import { type AgentReply, type AgentRequest, MAX_AGENT_REQUEST_BYTES, decodeAgentReply } from "./messages.js"
import { Requests } from "./requests.js"
import type { ClusterMember } from "./agent/Agent.js"
import { metaMismatch } from "./tensorMeta.js"
import { type TensorMeta, type TensorMetas, readMetas } from "./wireMetas.js"
import { objectStoreName } from "./transportRegistry.js"
import { fromWireError } from "./wireError.js"

/** What a fetch's reply is read into, and how the fetch ends. */
interface Fetch {
  readonly expected: ReadonlyArray<TensorMeta>
  /** Dropped once given up on before its body came: that memory is no longer this fetch's. */
  into: ReadonlyArray<Uint8Array>
  /** Given up on (aborted): its reply may still come, and is read into scratch memory of the expected size. */
  abandoned: boolean
  /** Its reply's body is being read into `into`. */
  readingInto: boolean
  /** Says that `into` is no longer written. */
  readonly ended: () => void
  /** Settles the fetch's promise; dropped once it did. */
  settle: { readonly resolve: () => void; readonly reject: (error: unknown) => void } | undefined
}

/** A producer's reply names the tensors its object describes, or it breaks the protocol. */
const checkSentAsDescribed = (fetch: Fetch, sent: TensorMetas): void => {
  const mismatch = metaMismatch(fetch.expected, readMetas(sent))
  if (mismatch !== undefined) throw new ProtocolError({ message: `a producer sent other tensors than its object describes: ${mismatch}` })
}

const settleFetch = (fetch: Fetch, error?: unknown): void => {
  const settle = fetch.settle
  fetch.settle = undefined
  if (error === undefined) settle?.resolve()
  else settle?.reject(error)
}

/**
 * Ends `fetch` with its reply (read, or failed with its connection). Made here, apart from the fetch's
 * own scope, so that a reply that never comes (a stopped producer) keeps only `fetch` alive, not
 * the signal whose reason's stack holds the frames, and so the receiving tensors, of whoever gave up.
 */
const follow = (reply: Promise<unknown>, fetch: Fetch): void => {
  const end = (error?: unknown): void => {
    fetch.ended()
    settleFetch(fetch, error)
  }
  reply.then(() => end(), end)
}

/** The abort listener of `fetch` (made apart from its scope, as `follow`). */
const giveUp =
  (fetch: Fetch) =>
  (event: Event): void => {
    fetch.abandoned = true
    if (!fetch.readingInto) {
      fetch.into = []
      fetch.ended()
    }
    settleFetch(fetch, (event.target as AbortSignal).reason)
  }

export class Fetches {
  private readonly connections = new Map<string, Promise<Connection>>()
  /** By the producer's address: a connection that closes fails its own fetches only. */
  private readonly requests = new Requests<AgentReply, Fetch>()
  private closed = false

  /** `tlsClient`: the credentials of a host of a cluster across hosts, for producers on other hosts. */
  constructor(private readonly tlsClient: TlsClient | undefined) {}

  /** The fetches of a process of `member` (a cluster across hosts, with its credentials) or of a cluster on one host. */
  static of(member: ClusterMember | undefined): Fetches {
    return new Fetches(member === undefined ? undefined : tlsOptionsFor(loadClusterConfig(member.config), member.member).client)
  }

  /** Reads an object from the agent at `address` into `into`; `writesUntil` hears when `into` is no longer written. */
  async fetch(
    address: string,
    objectId: string,
    expected: ReadonlyArray<TensorMeta>,
    into: ReadonlyArray<Tensor>,
    signal: AbortSignal,
    writesUntil: ((done: Promise<unknown>) => void) | undefined,
  ): Promise<void> {
    if (this.closed) throw new TransferError({ message: `no fetch of ${objectId} from ${address}: this process is closing`, transport: objectStoreName })
    const connection = await this.connection(address)
    // Given up on while connecting: nothing was asked, nothing will be written.
    if (signal.aborted) throw signal.reason
    let ended!: () => void
    const done = new Promise<void>((resolve) => (ended = resolve))
    writesUntil?.(done)
    let fetch!: Fetch
    const outcome = new Promise<void>((resolve, reject) => {
      fetch = {
        expected,
        into: into.map((t) => t.storage.bytes.subarray(t.byteOffset, t.byteOffset + t.nbytes)),
        abandoned: false,
        readingInto: false,
        ended,
        settle: { resolve, reject },
      }
    })
    follow(this.requests.request((reqId) => connection.send({ _tag: "Fetch", reqId, objectId } satisfies AgentRequest), { peer: address, context: fetch }), fetch)
    const onAbort = giveUp(fetch)
    signal.addEventListener("abort", onAbort, { once: true })
    try {
      await outcome
    } finally {
      signal.removeEventListener("abort", onAbort)
    }
  }

  private connection(address: string): Promise<Connection> {
    let connection = this.connections.get(address)
    if (connection === undefined) {
      connection = connect(address, {
        peerMaxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
        onFrame: (frame) => this.onReply(frame, address),
        bodyDestinations: (header) => {
          const reply = decodeAgentReply(header)
          if (reply._tag !== "Data") throw new ProtocolError({ message: `unexpected body on a ${reply._tag} reply` })
          const fetch = this.requests.context(reply.reqId, address)
          if (fetch === undefined) throw new ProtocolError({ message: `a body for request ${reply.reqId}, which was never made of ${address}` })
          checkSentAsDescribed(fetch, reply.tensors)
          // Bytes of a fetch given up on land in scratch memory (of the size asked for) to keep the stream in sync.
          if (fetch.abandoned) return fetch.expected.map((m) => new Uint8Array(m.nbytes))
          fetch.readingInto = true
          return fetch.into
        },
        onClose: (error) => {
          this.connections.delete(address)
          const failure = new TransferError({
            message: `connection to ${address} closed${error ? `: ${error.message}` : ""} (the producer died or misbehaved)`,
            transport: objectStoreName,
          })
          this.requests.failPeer(address, failure)
        },
      }, this.tlsClient)
      connection.catch(() => this.connections.delete(address))
      this.connections.set(address, connection)
    }
    return connection
  }

  /** A reply from the producer at `address`; one that breaks the protocol throws, which drops the connection and fails its fetches. */
  private onReply(frame: Frame, address: string): void {
    const reply = decodeAgentReply(frame.header)
    if (reply._tag === "Data") {
      const fetch = this.requests.context(reply.reqId, address)
      // No body was read into the fetch's memory: only tensors of no bytes, as described, may be done without one.
      if (fetch !== undefined && !fetch.readingInto && !fetch.abandoned) {
        checkSentAsDescribed(fetch, reply.tensors)
        if (fetch.expected.some((m) => m.nbytes > 0)) throw new ProtocolError({ message: `a producer answered fetch ${reply.reqId} without its bytes` })
      }
      this.requests.resolve(reply.reqId, reply, address)
    } else if (reply._tag === "Failed") this.requests.reject(reply.reqId, fromWireError(reply.error, { actor: "agent", method: "fetch" }), address)
    else throw new ProtocolError({ message: `unexpected ${reply._tag} reply to a fetch` })
  }

  close(): void {
    this.closed = true
    for (const connection of this.connections.values()) connection.then((c) => c.close()).catch(() => undefined)
  }
}
