/**
 * A framed, message-oriented connection over a Unix socket, or TCP under mutual TLS between hosts.
 * Unix sockets this module creates read frame bodies straight into their destination (tensor memory)
 * without an intermediate copy.
 */
import * as net from "node:net"
import * as tls from "node:tls"
import { ProtocolError, TransferError } from "../Errors.js"
import { MAX_MESSAGE_BYTES } from "../Limits.js"
import { type BodyDestinations, type Frame, FrameReader, writeFrame } from "./frame.js"

export interface ConnectionHandlers {
  readonly onFrame: (frame: Frame, connection: Connection) => void
  readonly onClose?: (error: Error | undefined, connection: Connection) => void
  readonly bodyDestinations?: BodyDestinations
  /** The largest frame body the peer may send (0 on channels whose messages carry none). */
  readonly maxBodyBytes?: number
  /** The largest header the peer may send; default MAX_MESSAGE_BYTES. */
  readonly maxHeaderBytes?: number
  /** The largest header the peer accepts: `send` refuses more; default MAX_MESSAGE_BYTES. */
  readonly peerMaxHeaderBytes?: number
}

const SCRATCH_BYTES = 64 * 1024

/** The `onread` option of a socket that lands body bytes in the reader's destination. */
const directReads = (reader: () => FrameReader, onError: (error: Error) => void): net.OnReadOpts => {
  const scratch = Buffer.alloc(SCRATCH_BYTES)
  let direct = false
  return {
    buffer: () => {
      const target = reader().directTarget()
      direct = target !== undefined
      return target ?? scratch
    },
    callback: (n) => {
      try {
        if (direct) reader().advanceDirect(n)
        // The scratch buffer is reused by the next read: the reader keeps a copy.
        else reader().push(Buffer.from(scratch.subarray(0, n)))
      } catch (error) {
        onError(error as Error)
      }
      return true
    },
  }
}

export class Connection {
  private closed = false
  private readonly reader: FrameReader

  constructor(
    readonly socket: net.Socket,
    private readonly handlers: ConnectionHandlers,
    reader?: FrameReader,
  ) {
    this.reader = reader ?? readerOf(handlers, (frame) => handlers.onFrame(frame, this))
    if (reader === undefined) {
      socket.on("data", (chunk: Buffer) => {
        try {
          this.reader.push(chunk)
        } catch (error) {
          this.fail(error)
        }
      })
    }
    socket.on("error", (error) => this.close(error))
    socket.on("close", () => this.close(undefined))
  }

  /** Wraps a socket that reads straight into frame destinations; `open` creates it with the given read options. */
  static direct(open: (onread: net.OnReadOpts) => net.Socket, handlers: ConnectionHandlers): Connection {
    let connection: Connection | undefined
    const reader = readerOf(handlers, (frame) => handlers.onFrame(frame, connection!))
    const socket = open(directReads(() => reader, (error) => connection?.fail(error)))
    connection = new Connection(socket, handlers, reader)
    return connection
  }

  /** A peer that breaks the framing cannot be resynchronised: drop it. */
  private fail(error: unknown): void {
    this.close(error instanceof ProtocolError ? error : new ProtocolError({ message: String(error) }))
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** Writes one message; one over what the peer accepts throws MessageTooLargeError and writes nothing. */
  send(header: unknown, body?: ReadonlyArray<Uint8Array>): void {
    if (this.closed) return
    writeFrame(this.socket, header, body, this.handlers.peerMaxHeaderBytes ?? MAX_MESSAGE_BYTES)
  }

  close(error?: Error): void {
    if (this.closed) return
    this.closed = true
    this.socket.destroy()
    this.reader.drop()
    this.handlers.onClose?.(error, this)
  }
}

/**
 * An `onFrame` handler that validates every header with `decode` (a peer can send anything) and drops
 * a peer that sends one that is malformed.
 */
export const decoded =
  <M>(decode: (header: unknown) => M, handle: (message: M, frame: Frame, connection: Connection) => void) =>
  (frame: Frame, connection: Connection): void => {
    let message: M
    try {
      message = decode(frame.header)
    } catch (error) {
      connection.close(error as Error)
      return
    }
    handle(message, frame, connection)
  }

const readerOf = (handlers: ConnectionHandlers, onFrame: (frame: Frame) => void): FrameReader =>
  new FrameReader(onFrame, handlers.bodyDestinations, handlers.maxBodyBytes, handlers.maxHeaderBytes)

/** A TCP endpoint of a cluster member under mutual TLS: the member's name (its certificate names it), address and port. */
export interface TlsEndpoint {
  readonly member: string
  readonly host: string
  readonly port: number
}

const TLS_ADDRESS = /^tls:\/\/([a-z0-9-]+)@\[?([0-9A-Fa-f.:]+)\]?:(\d{1,5})$/

/** The address of a TLS endpoint, as processes pass it around: `tls://member@host:port`. */
export const tlsAddress = (endpoint: TlsEndpoint): string =>
  `tls://${endpoint.member}@${net.isIPv6(endpoint.host) ? `[${endpoint.host}]` : endpoint.host}:${endpoint.port}`

/** The TLS endpoint an address names; undefined for a Unix socket path. */
export const tlsEndpoint = (address: string): TlsEndpoint | undefined => {
  const match = TLS_ADDRESS.exec(address)
  return match === null ? undefined : { member: match[1]!, host: match[2]!, port: Number(match[3]) }
}

/** The client options of a connection to a cluster member (the member's name is the certificate name it must present). */
export type TlsClient = (member: string) => tls.ConnectionOptions

/**
 * A member's TLS server (`options`: its ClusterTls's `server`, with its handshake timeout). Node only
 * reports a handshake that fails or times out (tlsClientError) and keeps its connection open: it is
 * destroyed here.
 */
export const tlsServer = (options: tls.TlsOptions, onSecure: (socket: tls.TLSSocket) => void): tls.Server =>
  tls.createServer(options, onSecure).on("tlsClientError", (_error, socket) => socket.destroy())

/** Opens a socket to `address`: a Unix socket path, or a `tls://` address under the TLS options `tlsClient` gives. */
export const openSocket = (address: string, tlsClient: TlsClient | undefined, onread?: net.OnReadOpts): { socket: net.Socket; ready: string } => {
  const endpoint = tlsEndpoint(address)
  if (endpoint === undefined) return { socket: net.createConnection({ path: address, ...(onread ? { onread } : {}) }), ready: "connect" }
  if (tlsClient === undefined) throw new TransferError({ message: `cannot reach ${address}: this process has no credentials of a cluster across hosts`, transport: "control" })
  return { socket: tls.connect({ ...tlsClient(endpoint.member), host: endpoint.host, port: endpoint.port }), ready: "secureConnect" }
}

export const connect = (address: string, handlers: ConnectionHandlers, tlsClient?: TlsClient): Promise<Connection> =>
  new Promise((resolve, reject) => {
    let ready = "connect"
    const open = (onread?: net.OnReadOpts) => {
      const opened = openSocket(address, tlsClient, onread)
      ready = opened.ready
      return opened.socket
    }
    let connection: Connection
    try {
      // TLS sockets take no `onread`: their bytes pass through the reader's buffers.
      connection = tlsEndpoint(address) === undefined ? Connection.direct(open, handlers) : new Connection(open(), handlers)
    } catch (error) {
      reject(error)
      return
    }
    const onError = (error: Error) =>
      reject(new TransferError({ message: `cannot reach ${address}: ${error.message}`, transport: "control" }))
    connection.socket.once("error", onError)
    connection.socket.once(ready, () => {
      connection.socket.off("error", onError)
      resolve(connection)
    })
  })
