/**
 * Binary framing of the control plane: `[u32 headerLength][u32 bodyLow][u32 bodyHigh][header][body]`.
 * The header is a v8-serialized message; the body carries raw tensor bytes, written from and read
 * into tensor memory without JSON or base64.
 */
import type { Socket } from "node:net"
import * as v8 from "node:v8"
import { MessageTooLargeError, ProtocolError } from "../Errors.js"
import { MAX_MESSAGE_BYTES } from "../Limits.js"

const PREFIX_BYTES = 12
/** Room a message keeps beside the value it carries (ids, transfer stats): a value may take the rest. */
const ENVELOPE_BYTES = 1024 * 1024
/** The most a value's description (skeleton, tensor metadata, transport metadata) may take. */
export const MAX_VALUE_BYTES = MAX_MESSAGE_BYTES - ENVELOPE_BYTES
/** A single frame body may not exceed this (the largest transfer is split per object, never beyond this). */
export const MAX_BODY_BYTES = 2 ** 40

export interface Frame {
  readonly header: unknown
  /** The header's encoded size. */
  readonly headerBytes: number
  /** The body, when the receiver did not provide destinations for it. */
  readonly body: Buffer | undefined
}

/**
 * Called once a header is decoded: return the buffers the body must be read into (their lengths
 * must add up to `bodyLength`), or undefined to receive the body as one Buffer.
 */
export type BodyDestinations = (header: unknown, bodyLength: number) => ReadonlyArray<Uint8Array> | undefined

export const encodePrefix = (headerLength: number, bodyLength: number): Buffer => {
  const prefix = Buffer.allocUnsafe(PREFIX_BYTES)
  prefix.writeUInt32LE(headerLength, 0)
  prefix.writeUInt32LE(bodyLength % 2 ** 32, 4)
  prefix.writeUInt32LE(Math.floor(bodyLength / 2 ** 32), 8)
  return prefix
}

/**
 * The error of something that cannot travel in a control message: it names the limit and what to
 * do instead.
 */
export const tooLarge = (what: string, bytes: number, limit: number): MessageTooLargeError =>
  new MessageTooLargeError({
    message: `${what} takes ${bytes} bytes, over the limit of ${limit} bytes (${limit === MAX_MESSAGE_BYTES ? "MAX_MESSAGE_BYTES" : `MAX_MESSAGE_BYTES is ${MAX_MESSAGE_BYTES}`}): pass bulk data as a Tensor (Tensor.from(typedArray)), whose bytes travel outside control messages, or put it as a tensor over a one-sided transport and pass the ref`,
    bytes,
    limit,
  })

/**
 * Serializes a header and lists the chunks of one frame, body segments untouched; a header over
 * `limit` (what the receiving end accepts) is refused with MessageTooLargeError.
 */
export const encodeFrame = (header: unknown, body: ReadonlyArray<Uint8Array> = [], limit = MAX_MESSAGE_BYTES): Array<Uint8Array> => {
  const encoded = v8.serialize(header)
  if (encoded.byteLength > limit) {
    const tag = (header as { _tag?: unknown } | null)?._tag
    throw tooLarge(`a ${typeof tag === "string" ? `${tag} ` : ""}control message`, encoded.byteLength, limit)
  }
  let bodyLength = 0
  for (const segment of body) bodyLength += segment.byteLength
  return [encodePrefix(encoded.byteLength, bodyLength), encoded, ...body]
}

/** Bodies up to this size are copied into the frame's single write: one small write beats a writev. */
const COALESCE_BYTES = 64 * 1024

/**
 * Writes one frame, or nothing when its header is over `limit`; returns false when the socket asks
 * the caller to wait for 'drain'.
 */
export const writeFrame = (socket: Socket, header: unknown, body: ReadonlyArray<Uint8Array> = [], limit = MAX_MESSAGE_BYTES): boolean => {
  const [prefix, encoded, ...segments] = encodeFrame(header, body, limit)
  const bodyLength = segments.reduce((n, s) => n + s.byteLength, 0)
  if (bodyLength <= COALESCE_BYTES) return socket.write(Buffer.concat([prefix, encoded, ...segments]))
  socket.write(Buffer.concat([prefix, encoded]))
  let flushed = true
  for (const segment of segments) {
    // A Buffer view over the same memory (SharedArrayBuffer included): no copy of tensor bytes.
    if (segment.byteLength > 0) flushed = socket.write(Buffer.from(segment.buffer, segment.byteOffset, segment.byteLength))
  }
  return flushed
}

const decodeHeader = (bytes: Buffer): unknown => {
  try {
    return v8.deserialize(bytes)
  } catch (cause) {
    throw new ProtocolError({ message: `undecodable frame header (${bytes.byteLength} bytes): ${String(cause)}` })
  }
}

/** Incremental frame decoder; throws ProtocolError on malformed input (the connection must then be dropped). */
export class FrameReader {
  private pending: Array<Buffer> = []
  private pendingBytes = 0
  private headerLength = -1
  private bodyLength = -1
  private header: unknown = undefined
  private destinations: ReadonlyArray<Uint8Array> | undefined
  private destinationIndex = 0
  private destinationOffset = 0
  private bodyReceived = 0

  constructor(
    private readonly onFrame: (frame: Frame) => void,
    private readonly bodyDestinations?: BodyDestinations,
    /** Channels whose messages never carry a body say 0: a peer cannot make us buffer one. */
    private readonly maxBodyBytes = MAX_BODY_BYTES,
    /** The largest header this channel's messages need: no more is ever buffered for one. */
    private readonly maxHeaderBytes = MAX_MESSAGE_BYTES,
  ) {}

  push(chunk: Buffer): void {
    let data = chunk
    while (data.byteLength > 0) {
      if (this.destinations !== undefined) {
        data = this.fillDestinations(data)
        continue
      }
      this.pending.push(data)
      this.pendingBytes += data.byteLength
      data = this.parsePending()
    }
  }

  private take(n: number): Buffer {
    const all = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes)
    const taken = all.subarray(0, n)
    const rest = all.subarray(n)
    this.pending = rest.byteLength > 0 ? [rest] : []
    this.pendingBytes = rest.byteLength
    return taken
  }

  /** Consumes what it can from the pending bytes; returns bytes that belong to body destinations. */
  private parsePending(): Buffer {
    for (;;) {
      if (this.headerLength < 0) {
        if (this.pendingBytes < PREFIX_BYTES) return Buffer.alloc(0)
        const prefix = this.take(PREFIX_BYTES)
        const headerLength = prefix.readUInt32LE(0)
        const bodyLength = prefix.readUInt32LE(4) + prefix.readUInt32LE(8) * 2 ** 32
        if (headerLength === 0 || headerLength > this.maxHeaderBytes) {
          throw new ProtocolError({ message: `frame header length ${headerLength} outside 1..${this.maxHeaderBytes} on this channel` })
        }
        if (bodyLength > this.maxBodyBytes) {
          throw new ProtocolError({ message: `frame body length ${bodyLength} exceeds ${this.maxBodyBytes} on this channel` })
        }
        this.headerLength = headerLength
        this.bodyLength = bodyLength
      }
      if (this.header === undefined) {
        if (this.pendingBytes < this.headerLength) return Buffer.alloc(0)
        this.header = decodeHeader(Buffer.from(this.take(this.headerLength)))
        if (this.header === undefined || this.header === null) {
          throw new ProtocolError({ message: "frame header decodes to nothing" })
        }
        const destinations = this.bodyLength > 0 ? this.bodyDestinations?.(this.header, this.bodyLength) : undefined
        if (destinations !== undefined) {
          let total = 0
          for (const d of destinations) total += d.byteLength
          if (total !== this.bodyLength) {
            throw new ProtocolError({
              message: `frame body of ${this.bodyLength} bytes does not match the ${total} bytes its header describes`,
            })
          }
          this.destinations = destinations
          this.destinationIndex = 0
          this.destinationOffset = 0
          this.bodyReceived = 0
          this.skipEmptyDestinations()
          if (this.destinationIndex >= destinations.length) {
            this.finishFrame(undefined)
            continue
          }
          return this.take(this.pendingBytes)
        }
      }
      if (this.pendingBytes < this.bodyLength) return Buffer.alloc(0)
      const body = this.bodyLength > 0 ? Buffer.from(this.take(this.bodyLength)) : undefined
      this.finishFrame(body)
    }
  }

  /** The unfilled part of the current body destination: a socket may read the next bytes straight into it. */
  directTarget(): Uint8Array | undefined {
    if (this.destinations === undefined) return undefined
    return this.destinations[this.destinationIndex].subarray(this.destinationOffset)
  }

  /** `n` bytes were read straight into `directTarget()`. */
  advanceDirect(n: number): void {
    this.destinationOffset += n
    this.bodyReceived += n
    this.skipEmptyDestinations()
    if (this.bodyReceived === this.bodyLength) this.finishFrame(undefined)
  }

  private skipEmptyDestinations(): void {
    const destinations = this.destinations!
    while (
      this.destinationIndex < destinations.length &&
      this.destinationOffset >= destinations[this.destinationIndex].byteLength
    ) {
      this.destinationIndex++
      this.destinationOffset = 0
    }
  }

  private fillDestinations(data: Buffer): Buffer {
    const destinations = this.destinations!
    let offset = 0
    while (offset < data.byteLength && this.destinationIndex < destinations.length) {
      const target = destinations[this.destinationIndex]
      const n = Math.min(target.byteLength - this.destinationOffset, data.byteLength - offset)
      target.set(data.subarray(offset, offset + n), this.destinationOffset)
      this.destinationOffset += n
      this.bodyReceived += n
      offset += n
      this.skipEmptyDestinations()
    }
    if (this.bodyReceived === this.bodyLength) this.finishFrame(undefined)
    return data.subarray(offset)
  }

  /** Forgets the frame in progress and what was buffered for it: a closed connection holds no memory. */
  drop(): void {
    this.pending = []
    this.pendingBytes = 0
    this.headerLength = -1
    this.bodyLength = -1
    this.header = undefined
    this.destinations = undefined
  }

  /**
   * Hands over the bytes received past the frames read so far, for a channel that carries one frame
   * and then a raw stream (called from `onFrame`).
   */
  takeUnread(): Buffer {
    return this.take(this.pendingBytes)
  }

  private finishFrame(body: Buffer | undefined): void {
    const header = this.header
    const headerBytes = this.headerLength
    this.headerLength = -1
    this.bodyLength = -1
    this.header = undefined
    this.destinations = undefined
    this.onFrame({ header, headerBytes, body })
  }
}
