/**
 * Hostile peers on a live actor's transfer agent: malformed frames over a real Unix socket must cost
 * the sender its connection and nothing else; requests for unknown objects get a Failed reply; the
 * actor keeps serving its objects afterwards.
 */
import * as net from "node:net"
import * as v8 from "node:v8"
import { type ActorHandle, type Cluster, type GetOptions, type ObjectRef, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Frame, FrameReader, encodeFrame, encodePrefix } from "../packages/core/src/internal/frame.ts"
import { writeMetas } from "../packages/core/src/internal/wireMetas.ts"
import { Worker } from "./fixtures/actors.ts"
import { agentSocketOf, expectClean, take as takeFrom } from "./helpers.ts"

let cluster: Cluster
let a: ActorHandle<typeof Worker>
let b: ActorHandle<typeof Worker>
let address: string
const take = <T>(ref: ObjectRef<T>, options?: GetOptions) => takeFrom(cluster)(ref, options)

const LARGE = 1 << 20

/** A raw client of the agent: what it received, and whether the agent hung up. */
const open = async () => {
  const socket = net.createConnection(address)
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
  const frames: Array<Frame> = []
  const reader = new FrameReader((frame) => frames.push(frame))
  socket.on("data", (chunk) => reader.push(chunk))
  socket.on("error", () => undefined)
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
  const send = (bytes: Uint8Array | ReadonlyArray<Uint8Array>) => {
    for (const chunk of Array.isArray(bytes) ? bytes : [bytes]) socket.write(chunk)
  }
  const reply = async (count: number) => {
    const deadline = Date.now() + 5_000
    while (frames.length < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    return frames.slice(0, count).map((f) => f.header as Record<string, unknown>)
  }
  return { socket, send, reply, closed }
}

/** Resolves true if the agent closes the connection within 5 s. */
const hangsUp = (closed: Promise<void>) =>
  Promise.race([closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))])

beforeAll(async () => {
  cluster = await start()
  ;[a, b] = await cluster.spawn(Worker, { count: 2 })
  address = agentSocketOf(a.actorId)
}, 60_000)

afterAll(() => cluster?.shutdown())

describe("a hostile peer on an agent's socket", () => {
  it("gets Failed replies for unknown objects and keeps its connection", async () => {
    const peer = await open()
    peer.send(encodeFrame({ _tag: "Fetch", reqId: 7, objectId: "Worker-0.999" }))
    peer.send(encodeFrame({ _tag: "Fetch", reqId: 8, objectId: "driver.1" }))
    peer.send(encodeFrame({ _tag: "Send", reqId: 9, objectId: "nope", transport: "object-store", group: "g", to: "x", toRank: 1, timeoutMs: 100 }))
    const replies = await peer.reply(3)
    expect(replies.map((r) => [r._tag, r.reqId, (r.error as { tag: string }).tag])).toEqual([
      ["Failed", 7, "ObjectFreedError"],
      ["Failed", 8, "ObjectFreedError"],
      ["Failed", 9, "ObjectFreedError"],
    ])
    expect((replies[0].error as { message: string }).message).toContain("Worker-0.999")
    expect(peer.socket.destroyed).toBe(false)
    peer.socket.destroy()
  })

  const fetchHeader = v8.serialize({ _tag: "Fetch", reqId: 1, objectId: "x" })
  const corpus: Array<[string, Array<Uint8Array>]> = [
    ["a zero header length", [encodePrefix(0, 0), Buffer.from([1, 2, 3, 4])]],
    ["an oversized header length", [encodePrefix(2 ** 32 - 1, 0), Buffer.alloc(64)]],
    ["an oversized body length", [Buffer.concat([encodePrefix(fetchHeader.byteLength, 0).subarray(0, 8), Buffer.from([0, 0, 0, 0x7f])]), fetchHeader]],
    ["header bytes that do not deserialize", [encodePrefix(8, 0), Buffer.from("garbage!")]],
    ["a header that decodes to null", encodeFrame(null)],
    ["an unknown message type", encodeFrame({ _tag: "Steal", reqId: 1, objectId: "Worker-0.1" })],
    ["a request with fields of the wrong types", encodeFrame({ _tag: "Fetch", reqId: "1", objectId: 3 })],
    ["a reply where a request belongs", encodeFrame({ _tag: "Data", reqId: 1, tensors: writeMetas([]) })],
    ["a plain string", encodeFrame("Fetch Worker-0.1")],
  ]

  it.each(corpus)("is disconnected after %s", async (_name, chunks) => {
    const peer = await open()
    peer.send(chunks)
    expect(await hangsUp(peer.closed)).toBe(true)
    expect(await peer.reply(0)).toEqual([])
  })

  it("is disconnected when it goes away in the middle of a frame announcing 1 TiB", async () => {
    const peer = await open()
    peer.send([encodePrefix(fetchHeader.byteLength, 2 ** 40), fetchHeader, Buffer.alloc(1024)])
    peer.socket.end()
    expect(await hangsUp(peer.closed)).toBe(true)
  })

  it("leaves the actor and its agent working", async () => {
    const pid = await take(a.pid())
    const made = a.make(LARGE)
    expect(await take(b.sum(made))).toBe(LARGE / 4)
    expect((await cluster.get(made)).sum()).toBe(LARGE / 4)
    made.release()
    expect(await take(a.pid())).toBe(pid)
    await expectClean(cluster)
  })
})
