/**
 * A framed, message-oriented connection over a Unix socket. Sockets this module creates read frame
 * bodies straight into their destination (tensor memory) without an intermediate copy.
 */
import * as net from "node:net"
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

export const connect = (address: string, handlers: ConnectionHandlers): Promise<Connection> =>
  new Promise((resolve, reject) => {
    const connection = Connection.direct((onread) => net.createConnection({ path: address, onread }), handlers)
    const onError = (error: Error) =>
      reject(new TransferError({ message: `cannot reach ${address}: ${error.message}`, transport: "control" }))
    connection.socket.once("error", onError)
    connection.socket.once("connect", () => {
      connection.socket.off("error", onError)
      resolve(connection)
    })
  })
