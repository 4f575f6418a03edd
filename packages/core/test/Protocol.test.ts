/**
 * Robustness of the wire protocol against a fixed corpus of malformed input: framing, headers,
 * message schemas, tensor metadata and value skeletons. Everything a peer can send must either decode
 * or throw ProtocolError; nothing may throw anything else, hang or allocate what a header merely claims.
 */
import * as v8 from "node:v8"
import { describe, expect, it } from "vitest"
import { ProtocolError } from "../src/Errors.js"
import { MAX_MESSAGE_BYTES } from "../src/Limits.js"
import { checkActorInfo } from "../src/internal/driver/Objects.js"
import { type Frame, FrameReader, encodeFrame, encodePrefix } from "../src/internal/frame.js"
import { decodeAgentReply, decodeAgentRequest, decodeFromActor, decodeObjectInfo, decodeToActor } from "../src/internal/messages.js"
import { decodeValue, encodeValue } from "../src/internal/valueCodec.js"
import { writeMetas } from "../src/internal/wireMetas.js"
import { Tensor } from "../src/Tensor.js"
import { thrown } from "./helpers/errors.ts"

const concat = (chunks: ReadonlyArray<Uint8Array>): Buffer => Buffer.concat(chunks.map((c) => Buffer.from(c)))

/** Feeds bytes to a fresh reader (in one chunk or byte by byte); returns the frames or the error thrown. */
const read = (bytes: Buffer, byteByByte = false): { frames: Array<Frame>; error: unknown } => {
  const frames: Array<Frame> = []
  const reader = new FrameReader((frame) => frames.push(frame))
  try {
    if (byteByByte) for (let i = 0; i < bytes.byteLength; i++) reader.push(bytes.subarray(i, i + 1))
    else reader.push(bytes)
    return { frames, error: undefined }
  } catch (error) {
    return { frames, error }
  }
}

const header = (bytes: Uint8Array, bodyLength = 0): Buffer => concat([encodePrefix(bytes.byteLength, bodyLength), bytes])

const fetch = { _tag: "Fetch", reqId: 1, objectId: "Worker-0.1" }
const valid = concat(encodeFrame(fetch, [new Uint8Array([1, 2, 3])]))

describe("FrameReader", () => {
  it("decodes a valid frame in one chunk and byte by byte (the corpus below is judged by the same reader)", () => {
    for (const byteByByte of [false, true]) {
      const { frames, error } = read(concat([valid, valid]), byteByByte)
      expect(error).toBeUndefined()
      expect(frames.map((f) => f.header)).toEqual([fetch, fetch])
      expect([...frames[1].body!]).toEqual([1, 2, 3])
    }
  })

  const malformed: Array<[string, Buffer]> = [
    ["zero header length", concat([encodePrefix(0, 0), Buffer.from([1])])],
    ["header length beyond the limit", encodePrefix(MAX_MESSAGE_BYTES + 1, 0)],
    ["header length 2^32 - 1", encodePrefix(2 ** 32 - 1, 0)],
    ["body length beyond the limit", concat([encodePrefix(4, 0).subarray(0, 8), Buffer.from([0, 0, 0, 0x7f])])],
    ["body length 2^64 - 1", concat([encodePrefix(4, 0).subarray(0, 4), Buffer.alloc(8, 0xff)])],
    ["header bytes that are not v8-serialized", header(Buffer.from("not a v8 value at all"))],
    ["a v8 header cut short", header(v8.serialize(fetch).subarray(0, 12))],
    ["a v8 version tag and garbage", header(Buffer.from([0xff, 0x0f, 0x6f, 0x22, 0x05, 0x61]))],
    ["a header that decodes to null", header(v8.serialize(null))],
    ["a header that decodes to undefined", header(v8.serialize(undefined))],
  ]

  it.each(malformed)("rejects %s with ProtocolError", (_name, bytes) => {
    for (const byteByByte of [false, true]) {
      const { frames, error } = read(bytes, byteByByte)
      expect(frames).toEqual([])
      expect(error).toBeInstanceOf(ProtocolError)
    }
  })

  it.each([
    ["a prefix cut short", valid.subarray(0, 7)],
    ["a header cut short", valid.subarray(0, 14)],
    ["a body cut short", valid.subarray(0, valid.byteLength - 1)],
    ["a body of 2^40 bytes announced, 3 sent", concat([encodePrefix(v8.serialize(fetch).byteLength, 2 ** 40), v8.serialize(fetch), Buffer.from([1, 2, 3])])],
  ])("waits on %s without emitting a frame or allocating what it announces", (_name, bytes) => {
    const { frames, error } = read(bytes)
    expect(error).toBeUndefined()
    expect(frames).toEqual([])
  })

  it("rejects body destinations that do not add up to the body length", () => {
    const reader = new FrameReader(
      () => undefined,
      () => [new Uint8Array(2)],
    )
    expect(() => reader.push(valid)).toThrow(ProtocolError)
  })

  it("throws nothing but ProtocolError on seeded random frames", () => {
    let state = 0x2545f491
    const next = () => {
      state ^= state << 13
      state ^= state >>> 17
      state ^= state << 5
      return state >>> 0
    }
    let rejected = 0
    for (let i = 0; i < 500; i++) {
      const length = next() % 64
      const bytes = Buffer.from(Array.from({ length }, () => next() & 0xff))
      // Half of them with a plausible prefix, so that headers get decoded too.
      if (i % 2 === 0 && length > 12) {
        bytes.writeUInt32LE(length - 12, 0)
        bytes.writeUInt32LE(0, 4)
        bytes.writeUInt32LE(0, 8)
      }
      const { error } = read(bytes)
      if (error !== undefined) {
        expect(error).toBeInstanceOf(ProtocolError)
        rejected++
      }
    }
    expect(rejected).toBeGreaterThan(100)
  })
})

describe("message decoders", () => {
  const corpus: Array<[string, (input: unknown) => unknown, unknown]> = [
    ["a number as a request", decodeAgentRequest, 42],
    ["a string as a request", decodeAgentRequest, "Fetch"],
    ["an array as a request", decodeAgentRequest, [fetch]],
    ["an unknown tag", decodeAgentRequest, { _tag: "Steal", reqId: 1, objectId: "x" }],
    ["a Fetch without reqId", decodeAgentRequest, { _tag: "Fetch", objectId: "x" }],
    ["a Fetch with a string reqId", decodeAgentRequest, { _tag: "Fetch", reqId: "1", objectId: "x" }],
    ["a Fetch with a numeric objectId", decodeAgentRequest, { _tag: "Fetch", reqId: 1, objectId: 7 }],
    ["a Send without a group", decodeAgentRequest, { _tag: "Send", reqId: 1, objectId: "x", transport: "t", to: "a", toRank: 1, timeoutMs: 1 }],
    ["an AllGathered with strings for blobs", decodeAgentRequest, { _tag: "AllGathered", reqId: 1, blobs: ["a"] }],
    ["a GroupCreate with a setup of the wrong shape", decodeAgentRequest, { _tag: "GroupCreate", reqId: 1, setup: { name: "g" } }],
    ["a reply sent as a request", decodeAgentRequest, { _tag: "Done", reqId: 1 }],
    ["a Data reply with malformed tensor metas", decodeAgentReply, { _tag: "Data", reqId: 1, tensors: { names: ["float32", "cpu"], bytes: new Uint8Array([1, 0, 0, 0, 0, 1]) } }],
    ["a Data reply with tensor metas as a list of objects", decodeAgentReply, { _tag: "Data", reqId: 1, tensors: [{ dtype: "float32", shape: [4], device: "cpu", nbytes: 16 }] }],
    ["a Failed reply without an error", decodeAgentReply, { _tag: "Failed", reqId: 1 }],
    ["a Result without transfers", decodeFromActor, { _tag: "Result", callId: 1 }],
    ["a Result whose transfer started at NaN", decodeFromActor, {
      _tag: "Result", callId: 1, transfers: [{ objectId: "x", transport: "t", from: "a", to: "b", bytes: 4, startedAt: Number.NaN, ms: 1 }],
    }],
    ["a Result whose transfer moved Infinity bytes", decodeFromActor, {
      _tag: "Result", callId: 1, transfers: [{ objectId: "x", transport: "t", from: "a", to: "b", bytes: Infinity, startedAt: 1, ms: 1 }],
    }],
    ["a Ready without an address", decodeFromActor, { _tag: "Ready", pid: 1 }],
    ["a Put with a broken ObjectInfo", decodeFromActor, { _tag: "Put", reqId: 1, info: { objectId: "x" } }],
    ["a Call whose args are not bytes", decodeToActor, { _tag: "Call", callId: 1, method: "m", returnId: "r", args: "x", argTensors: writeMetas([]), refs: [] }],
    ["a Call whose tensors name an unknown dtype", decodeToActor, {
      _tag: "Call", callId: 1, method: "m", returnId: "r", args: new Uint8Array(), refs: [], argTensors: writeMetas([{ dtype: "float128", shape: [4], device: "cpu" }]),
    }],
    ["a Free with numeric ids", decodeToActor, { _tag: "Free", objectIds: [1, 2] }],
    ["a Free of an id longer than any of ours", decodeToActor, { _tag: "Free", objectIds: ["x".repeat(257)] }],
    ["a Fetch of an id longer than any of ours", decodeAgentRequest, { _tag: "Fetch", reqId: 1, objectId: "x".repeat(257) }],
    ["an AllGather of a group name longer than any of ours", decodeFromActor, { _tag: "AllGather", reqId: 1, group: "g".repeat(513), groupId: 1, blob: new Uint8Array(), timeoutMs: 1 }],
    ["an ObjectInfo whose skeleton is a string", decodeObjectInfo, { objectId: "x", producer: "p", producerAddress: "a", transport: "t", skeleton: "s", tensors: writeMetas([]), refs: [] }],
    ["an ObjectInfo whose tensor metadata names 257 dtypes and devices", decodeObjectInfo, {
      objectId: "x", producer: "p", producerAddress: "a", transport: "t", skeleton: new Uint8Array(), refs: [],
      tensors: { names: Array.from({ length: 257 }, () => "cpu"), bytes: new Uint8Array(4) },
    }],
    ["an ObjectInfo whose packed mask is a list", decodeObjectInfo, {
      objectId: "x", producer: "p", producerAddress: "a", transport: "t", skeleton: new Uint8Array(), refs: [],
      tensors: writeMetas([{ dtype: "float32", shape: [4], device: "cpu" }]), packed: [0],
    }],
  ]

  it.each(corpus)("rejects %s with ProtocolError", (_name, decode, input) => {
    expect(() => decode(input)).toThrow(ProtocolError)
  })

  it("accepts the well-formed messages the corpus was derived from", () => {
    expect(decodeAgentRequest(fetch)).toEqual(fetch)
    expect(decodeAgentReply({ _tag: "Done", reqId: 1 })).toEqual({ _tag: "Done", reqId: 1 })
    expect(decodeToActor({ _tag: "Free", objectIds: ["a"] })).toEqual({ _tag: "Free", objectIds: ["a"] })
    const data = { _tag: "Data", reqId: 1, tensors: writeMetas([{ dtype: "float32", shape: [2, 3], device: "cpu" }]) }
    expect(decodeAgentReply(data)).toEqual(data)
  })
})

describe("value skeletons (tensor metadata: WireMetas.test.ts)", () => {
  it("decodeValue rejects undecodable skeletons, and placeholders malformed or not one per tensor", () => {
    const hooks = { tensors: [Tensor.ones([1])], ref: (id: string) => id }
    const { skeleton } = encodeValue({ a: [Tensor.ones([1])] })
    expect((decodeValue(skeleton, hooks) as { a: Array<Tensor> }).a[0].numel).toBe(1)
    expect(() => decodeValue(Buffer.from("garbage"), hooks)).toThrow(ProtocolError)
    expect(() => decodeValue(v8.serialize({ "\u0000tensorlane:tensor": -1 }), hooks)).toThrow(ProtocolError)
    expect(() => decodeValue(v8.serialize({ "\u0000tensorlane:tensor": 1.5 }), hooks)).toThrow(ProtocolError)
    expect(() => decodeValue(v8.serialize({ "\u0000tensorlane:tensor": 5 }), hooks)).toThrow(ProtocolError)
    expect(() => decodeValue(v8.serialize({ "\u0000tensorlane:ref": 5 }), hooks)).toThrow(ProtocolError)
    // Placeholders stand for the tensors in the order they are met, whether or not they are one object.
    const two = v8.serialize({ a: { "\u0000tensorlane:tensor": true }, b: [{ "\u0000tensorlane:tensor": true }] })
    expect(() => decodeValue(two, hooks)).toThrow(ProtocolError)
    expect(decodeValue(two, { ...hooks, tensors: [Tensor.ones([1]), Tensor.zeros([2])] })).toMatchObject({ a: { numel: 1 }, b: [{ numel: 2 }] })
    expect(() => decodeValue(skeleton, { ...hooks, tensors: [Tensor.ones([1]), Tensor.zeros([2])] })).toThrow(/1 tensor placeholders for the 2 tensors/)
  })

  it("decodeValue refuses a sparse array longer than its skeleton's bytes, which would be made dense (15 bytes for 2^32 - 1 elements)", () => {
    const sparse: Array<unknown> = []
    sparse.length = 2 ** 32 - 1
    const skeleton = v8.serialize({ a: sparse })
    expect(skeleton.byteLength).toBeLessThan(32)
    expect(thrown(() => decodeValue(skeleton, { tensors: [], ref: (id) => id }))).toMatchObject({ _tag: "ProtocolError", message: expect.stringMatching(/array of 4294967295 elements/) })
    expect(decodeValue(v8.serialize({ a: [1, , 3] }), { tensors: [], ref: (id) => id })).toEqual({ a: [1, undefined, 3] })
    // Many of them, each shorter than the skeleton: their elements together may not pass its bytes either.
    const many = v8.serialize(Array.from({ length: 400 }, () => new Array(3000)))
    expect(many.byteLength).toBeLessThan(4000)
    expect(thrown(() => decodeValue(many, { tensors: [], ref: (id) => id }))).toMatchObject({ _tag: "ProtocolError" })
  })

  it("decodeValue looks at a shared object once: a value that refers to one object of 20,000 keys from 20,000 places decodes at once", () => {
    const shared = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`w${i}`, i]))
    const { skeleton } = encodeValue(Array.from({ length: 20_000 }, () => shared))
    const back = decodeValue(skeleton, { tensors: [], ref: (id) => id }) as Array<unknown>
    expect(back[19_999]).toBe(back[0])
  })
})

describe("an object an actor describes (its size: test/hostilePeers.test.ts)", () => {
  const info = (objectId: string, producer: string) => ({
    objectId,
    producer,
    producerAddress: "a",
    transport: "object-store",
    skeleton: new Uint8Array(0),
    tensors: writeMetas([]),
    refs: [],
  })

  it("is its own: under its ids for a put, under the call's id for a result, never another's", () => {
    expect(() => checkActorInfo("W-0", info("W-0.7", "W-0"))).not.toThrow()
    expect(() => checkActorInfo("W-0", info("driver.3", "W-0"), "driver.3")).not.toThrow()
    for (const [described, call] of [
      [info("W-1.7", "W-0"), undefined],
      [info("W-0.7", "W-1"), undefined],
      [info("W-00.7", "W-0"), undefined],
      [info("W-0.x", "W-0"), undefined],
      [info("W-0.", "W-0"), undefined],
      [info("W-0.07", "W-0"), undefined],
      [info("driver.4", "W-0"), "driver.3"],
      [info("driver.3", "W-1"), "driver.3"],
    ] as const) {
      expect(() => checkActorInfo("W-0", described, call)).toThrow(ProtocolError)
    }
  })
})
