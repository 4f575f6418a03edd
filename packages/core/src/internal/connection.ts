/**
 * A framed, message-oriented connection over a Unix socket, with request/reply correlation for the
 * agent protocol.
 */
import * as net from "node:net"
import { ProtocolError, TransferError } from "../Errors.js"
import { type BodyDestinations, type Frame, FrameReader, writeFrame } from "./frame.js"

export interface ConnectionHandlers {
  readonly onFrame: (frame: Frame, connection: Connection) => void
  readonly onClose?: (error: Error | undefined, connection: Connection) => void
  readonly bodyDestinations?: BodyDestinations
}

export class Connection {
  private closed = false
  private closeError: Error | undefined

  constructor(
    readonly socket: net.Socket,
    private readonly handlers: ConnectionHandlers,
  ) {
    const reader = new FrameReader((frame) => handlers.onFrame(frame, this), handlers.bodyDestinations)
    socket.setNoDelay?.(true)
    socket.on("data", (chunk: Buffer) => {
      if (this.closed) return
      try {
        reader.push(chunk)
      } catch (error) {
        // A peer that breaks the framing cannot be resynchronised: drop it.
        this.close(error instanceof ProtocolError ? error : new ProtocolError({ message: String(error) }))
      }
    })
    socket.on("error", (error) => this.close(error))
    socket.on("close", () => this.close(undefined))
  }

  get isClosed(): boolean {
    return this.closed
  }

  send(header: unknown, body?: ReadonlyArray<Uint8Array>): void {
    if (this.closed) return
    writeFrame(this.socket, header, body)
  }

  close(error?: Error): void {
    if (this.closed) return
    this.closed = true
    this.closeError = error
    this.socket.destroy()
    this.handlers.onClose?.(error, this)
  }

  get error(): Error | undefined {
    return this.closeError
  }
}

export const connect = (address: string, handlers: ConnectionHandlers): Promise<Connection> =>
  new Promise((resolve, reject) => {
    const socket = net.createConnection(address)
    const onError = (error: Error) =>
      reject(new TransferError({ message: `cannot reach ${address}: ${error.message}`, transport: "control" }))
    socket.once("error", onError)
    socket.once("connect", () => {
      socket.off("error", onError)
      resolve(new Connection(socket, handlers))
    })
  })
