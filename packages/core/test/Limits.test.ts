/**
 * Size limits of the control plane, unit by unit: a reader buffers no more than its channel accepts
 * and gives back what it held once its connection closes; a sender refuses a message its peer would
 * refuse, before writing anything; an error crossing processes is cut to its bounds; a value too
 * large to travel is refused when it is produced, and nothing of it is stored.
 */
import * as net from "node:net"
import * as v8 from "node:v8"
import { describe, expect, it } from "vitest"
import { ApplicationError, MessageTooLargeError, ProtocolError, TransferError } from "../src/Errors.js"
import { Connection } from "../src/internal/connection.js"
import { MAX_MESSAGE_BYTES } from "../src/Limits.js"
import { FrameReader, MAX_VALUE_BYTES, encodeFrame, encodePrefix } from "../src/internal/frame.js"
import { Fetches } from "../src/internal/fetches.js"
import type { AgentClient } from "../src/internal/agentClient.js"
import { ProcessRuntime } from "../src/internal/processRuntime.js"
import { objectStoreName, objectStoreTransport } from "../src/internal/transportRegistry.js"
import { ERROR_MESSAGE_CHARS, ERROR_STACK_CHARS, fromWireError, toWireError } from "../src/internal/wireError.js"
import { TensorStore } from "../src/TensorStore.js"
import { rejection, thrown } from "./helpers/errors.ts"
import { exposedGc as gc } from "./helpers/gc.ts"

const concat = (chunks: ReadonlyArray<Uint8Array>): Buffer => Buffer.concat(chunks.map((c) => Buffer.from(c)))

/** A connection over a socket that is never connected: what it is given to write is recorded. */
const unconnected = (options: { maxHeaderBytes?: number; peerMaxHeaderBytes?: number } = {}) => {
  const socket = new net.Socket()
  const written: Array<Uint8Array> = []
  socket.write = ((chunk: Uint8Array) => written.push(chunk) > 0) as typeof socket.write
  const frames: Array<unknown> = []
  const connection = new Connection(socket, { ...options, onFrame: (frame) => frames.push(frame.header) })
  return { socket, connection, written, frames }
}

describe("frame buffering", () => {
  it("refuses a header over the channel's bound as soon as the prefix announces it, and takes one at the bound", () => {
    const frames: Array<unknown> = []
    const reader = new FrameReader((frame) => frames.push(frame.header), undefined, 0, 1024)
    expect(() => reader.push(encodePrefix(1025, 0))).toThrow(ProtocolError)
    const atBound = { _tag: "Fetch", pad: "" }
    // The pad's length takes one more byte once it is over 127.
    atBound.pad = "p".repeat(1024 - v8.serialize(atBound).byteLength - 1)
    const bytes = concat(encodeFrame(atBound))
    expect(bytes.byteLength).toBe(12 + 1024)
    new FrameReader((frame) => frames.push(frame.header), undefined, 0, 1024).push(bytes)
    expect(frames).toEqual([atBound])
  })

  it("gives back the partial frame a connection buffered once it closes, even while the connection is still referenced", async () => {
    const { socket, connection } = unconnected()
    const held = (() => {
      const chunk = Buffer.alloc(256 * 1024, 1)
      chunk.set(encodePrefix(MAX_MESSAGE_BYTES, 0))
      socket.emit("data", chunk)
      return new WeakRef(chunk.buffer)
    })()
    connection.close()
    // A WeakRef holds its target until the current job ends.
    await new Promise((resolve) => setTimeout(resolve, 0))
    gc()
    expect(held.deref()).toBeUndefined()
    expect(connection.isClosed).toBe(true)
  })
})

describe("sending", () => {
  it("refuses a message over what the peer accepts, naming the size, the limit and the remedy, and writes nothing", () => {
    const { connection, written } = unconnected({ peerMaxHeaderBytes: 1024 })
    const message = { _tag: "Gathered", blob: new Uint8Array(2048) }
    const error = thrown(() => connection.send(message))
    expect(error).toBeInstanceOf(MessageTooLargeError)
    const { bytes, limit, message: text } = error as MessageTooLargeError
    expect([bytes, limit]).toEqual([v8.serialize(message).byteLength, 1024])
    expect(text).toContain("Gathered")
    expect(text).toContain("1024")
    expect(text).toMatch(/Tensor.*put/)
    expect(written).toEqual([])
    connection.send({ _tag: "Done", reqId: 1 })
    expect(written).toHaveLength(1)
  })

  it("refuses a message over MAX_MESSAGE_BYTES on a channel that sets no bound of its own", () => {
    const { connection, written } = unconnected()
    expect(() => connection.send({ _tag: "Result", text: "x".repeat(MAX_MESSAGE_BYTES) })).toThrow(MessageTooLargeError)
    expect(written).toEqual([])
  })
})

describe("errors crossing processes", () => {
  const huge = "e".repeat(34 * 1024 * 1024)

  it("cut message and stack to their bounds, say how much is missing, and keep the stack's frames", () => {
    const wire = toWireError(new RangeError(huge))
    expect(wire.message.length).toBeLessThanOrEqual(ERROR_MESSAGE_CHARS)
    const kept = wire.message.indexOf("...")
    expect(wire.message.slice(kept)).toBe(`... (${huge.length - kept} more characters)`)
    expect(wire.stack.length).toBeLessThanOrEqual(ERROR_STACK_CHARS)
    expect(wire.stack.startsWith(`RangeError: ${wire.message}\n`)).toBe(true)
    expect(wire.stack).toContain("Limits.test.ts")
    expect(v8.serialize(wire).byteLength).toBeLessThan(512 * 1024)
    const error = fromWireError(wire, { actor: "A-0", method: "m" })
    expect(error).toBeInstanceOf(ApplicationError)
    expect(error.message).toBe(`A-0.m threw RangeError: ${wire.message}`)
  })

  it("cut every string field, keep a known error's class, and leave out fields beyond their total bound", () => {
    const error = new TransferError({ message: huge, transport: huge })
    Object.assign(error, { tried: [huge, "b"], ...Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`extra${i}`, "f".repeat(16 * 1024)])) })
    const wire = toWireError(error)
    expect(wire.tag).toBe("TransferError")
    const transport = wire.fields.transport as string
    expect(transport.length).toBeLessThanOrEqual(ERROR_STACK_CHARS)
    expect(transport).toMatch(/^e+\.\.\. \(\d+ more characters\)$/)
    expect((wire.fields.tried as Array<string>)[0].length).toBeLessThanOrEqual(ERROR_STACK_CHARS)
    expect((wire.fields.tried as Array<string>)[1]).toBe("b")
    expect(Object.keys(wire.fields).length).toBeLessThan(64)
    expect(v8.serialize(wire).byteLength).toBeLessThan(512 * 1024)
    const back = fromWireError(wire, { actor: "A-0", method: "m" })
    expect(back).toBeInstanceOf(TransferError)
    // Cut once, it crosses again as it is.
    const again = toWireError(back)
    expect([again.message, again.fields.transport]).toEqual([wire.message, transport])
  })
})

it("refuses to produce a value whose description is over the limit, and stores nothing for it", async () => {
  const store = new TensorStore()
  const transports = new Map([[objectStoreName, objectStoreTransport(() => Promise.reject(new Error("no fetches here")))]])
  const runtime = new ProcessRuntime("driver", { id: "test", closed: false }, { address: "" } as AgentClient, store, transports, (id) => id as never, new Fetches(undefined))
  const error = await rejection(runtime.produce("driver.1", "x".repeat(MAX_VALUE_BYTES), objectStoreName, "put"))
  expect(error).toBeInstanceOf(MessageTooLargeError)
  expect((error as MessageTooLargeError).limit).toBe(MAX_VALUE_BYTES)
  expect(store.inspect().primary).toEqual([])
  const fits = await runtime.produce("driver.2", "x".repeat(MAX_VALUE_BYTES - 1024), objectStoreName, "put")
  expect(fits.skeleton.byteLength).toBeGreaterThan(MAX_VALUE_BYTES - 1024)
})
