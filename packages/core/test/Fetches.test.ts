/**
 * The object-store's fetches, on the thread that needs the objects: a producer's connection that
 * closes fails the fetches from that producer only, and the others land whole; once closed, none
 * starts. (A fetch given up on lets its buffer go at once: test/failedTransfers.test.ts.)
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, expect, it } from "vitest"
import { Fetches } from "../src/internal/fetches.js"
import { Connection } from "../src/internal/connection.js"
import type { AgentReply, AgentRequest } from "../src/internal/messages.js"
import { tensorMeta } from "../src/internal/tensorMeta.js"
import { writeMetas } from "../src/internal/wireMetas.js"
import { Tensor } from "../src/Tensor.js"

let dir: string
let fetches: Fetches

beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-fetches-test-"))
  fetches = new Fetches(undefined)
})

afterEach(() => {
  fetches.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

const until = async (condition: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Two fake producers, "a" and "b", each answering nothing until the test makes it; their fetches' connections and request ids. */
const twoProducers = async () => {
  const asked = new Map<string, { connection: Connection; reqId: number }>()
  const servers = await Promise.all(
    ["a", "b"].map(async (name) => {
      const server = net.createServer((socket) => {
        new Connection(socket, { onFrame: (frame, connection) => asked.set(name, { connection, reqId: (frame.header as AgentRequest).reqId }) })
      })
      await new Promise<void>((resolve) => server.listen(join(dir, `${name}.sock`), resolve))
      return server
    }),
  )
  const fetch = (producer: string, into: Tensor) =>
    fetches.fetch(join(dir, `${producer}.sock`), `${producer}.1`, [tensorMeta(into)], [into], new AbortController().signal, undefined)
  return { asked, fetch, close: () => servers.forEach((s) => s.close()) }
}

it("a producer's connection that closes fails the fetches from that producer only", async () => {
  const { asked, fetch, close } = await twoProducers()
  try {
    const [intoA, intoB] = [Tensor.zeros([4], { dtype: "uint8" }), Tensor.zeros([4], { dtype: "uint8" })]
    const fromA = fetch("a", intoA).catch((error: unknown) => error)
    const fromB = fetch("b", intoB)
    await until(() => asked.size === 2, "both fetches")
    asked.get("a")!.connection.close()
    expect(await fromA).toMatchObject({ _tag: "TransferError", message: expect.stringContaining("a.sock") })
    const b = asked.get("b")!
    b.connection.send({ _tag: "Data", reqId: b.reqId, tensors: writeMetas([intoB]) } satisfies AgentReply, [new Uint8Array([1, 2, 3, 4])])
    await fromB
    expect([...intoB.typedArray()]).toEqual([1, 2, 3, 4])
  } finally {
    close()
  }
})

it("a fetch once closed fails at once with TransferError, and connects to nothing", async () => {
  let connected = 0
  const server = net.createServer(() => connected++)
  await new Promise<void>((resolve) => server.listen(join(dir, "c.sock"), resolve))
  try {
    fetches.close()
    const into = Tensor.zeros([4], { dtype: "uint8" })
    const error = await fetches.fetch(join(dir, "c.sock"), "c.1", [tensorMeta(into)], [into], new AbortController().signal, undefined).catch((e: unknown) => e)
    expect(error).toMatchObject({ _tag: "TransferError", message: expect.stringContaining("closing") })
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(connected).toBe(0)
  } finally {
    server.close()
  }
})

it("a producer's Data without the bytes it describes fails the fetch instead of handing out memory never written", async () => {
  const { asked, fetch, close } = await twoProducers()
  try {
    const into = Tensor.full([4], 9, { dtype: "uint8" })
    const fetched = fetch("a", into).catch((error: unknown) => error)
    await until(() => asked.has("a"), "the fetch")
    const a = asked.get("a")!
    a.connection.send({ _tag: "Data", reqId: a.reqId, tensors: writeMetas([into]) } satisfies AgentReply)
    expect(await fetched).toMatchObject({ _tag: "TransferError", message: expect.stringContaining("without its bytes") })
  } finally {
    close()
  }
})

it("a producer cannot answer another producer's fetch: its reply is ignored, and the right one lands", async () => {
  const { asked, fetch, close } = await twoProducers()
  try {
    const [intoA, intoB] = [Tensor.zeros([4], { dtype: "uint8" }), Tensor.zeros([4], { dtype: "uint8" })]
    const fromA = fetch("a", intoA)
    const fromB = fetch("b", intoB).catch((error: unknown) => error)
    await until(() => asked.size === 2, "both fetches")
    const [a, b] = [asked.get("a")!, asked.get("b")!]
    // b answers a's request, with bytes: not taken for a's.
    b.connection.send({ _tag: "Data", reqId: a.reqId, tensors: writeMetas([intoA]) } satisfies AgentReply, [new Uint8Array([6, 6, 6, 6])])
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect([...intoA.typedArray()]).toEqual([0, 0, 0, 0])
    a.connection.send({ _tag: "Data", reqId: a.reqId, tensors: writeMetas([intoA]) } satisfies AgentReply, [new Uint8Array([1, 2, 3, 4])])
    await fromA
    expect([...intoA.typedArray()]).toEqual([1, 2, 3, 4])
    // b broke the protocol: its connection was dropped and its own fetch failed.
    expect(await fromB).toMatchObject({ _tag: "TransferError", message: expect.stringContaining("b.sock") })
  } finally {
    close()
  }
})
