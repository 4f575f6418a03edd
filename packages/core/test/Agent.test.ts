/**
 * The transfer agent on its own (in this thread): a request for an object whose registration the main
 * thread posted but the agent has not taken in yet is served, because the agent takes in queued
 * commands first; an object never registered fails typed; the rendezvous of its groups, and the sends
 * that wait for their object, end with the connection that asked for them.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, expect, it } from "vitest"
import { Agent, type AgentCommand } from "../src/internal/agent/Agent.js"
import { type Connection, connect } from "../src/internal/connection.js"
import type { AgentReply } from "../src/internal/messages.js"
import { toWireTensor } from "../src/internal/wireTensor.js"
import { Tensor } from "../src/Tensor.js"
import { finishCreations, held, rendezvousFailures } from "./fixtures/heldGroups.ts"

let dir: string
let agent: Agent
let client: Connection
/** Commands "posted" by the main thread and not yet delivered to the agent. */
const queued: Array<AgentCommand> = []
const replies: Array<{ reply: AgentReply; body: Array<number> }> = []

beforeEach(async () => {
  dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-agent-test-"))
  agent = new Agent({
    processId: "producer",
    address: join(dir, "agent.sock"),
    transports: [new URL("./fixtures/heldGroups.ts", import.meta.url).href],
    parentPid: undefined,
    emit: () => undefined,
    takeQueuedCommands: () => {
      for (const command of queued.splice(0)) void agent.command(command)
    },
  })
  await agent.start()
  client = await connect(join(dir, "agent.sock"), {
    onFrame: (frame) => replies.push({ reply: frame.header as AgentReply, body: [...(frame.body ?? [])] }),
  })
})

afterEach(async () => {
  client.close()
  await agent.command({ op: "close" })
  fs.rmSync(dir, { recursive: true, force: true })
  replies.length = 0
})

const until = async (condition: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

const nextReply = async () => {
  await until(() => replies.length > 0, "a reply")
  return replies.shift()!
}

it("serves an object whose registration is still queued when the request for it arrives", async () => {
  const tensor = Tensor.from([1, 2, 3, 4], { dtype: "uint8" })
  queued.push({ op: "register", objectId: "producer.1", transport: "object-store", tensors: [toWireTensor(tensor)], registeredByMain: true })
  client.send({ _tag: "Fetch", reqId: 7, objectId: "producer.1" })
  const { reply, body } = await nextReply()
  expect(reply).toMatchObject({ _tag: "Data", reqId: 7 })
  expect(body).toEqual([1, 2, 3, 4])
  expect(queued).toEqual([])
})

it("fails a request for an object never registered with ObjectFreedError", async () => {
  client.send({ _tag: "Fetch", reqId: 8, objectId: "producer.2" })
  const { reply } = await nextReply()
  expect(reply).toMatchObject({ _tag: "Failed", reqId: 8, error: { tag: "ObjectFreedError" } })
})

it("destroys a group that its owner destroyed while the transport was still connecting it, and fails its creation", async () => {
  const setup = { id: 1, name: "g", backend: "held-groups", rank: 0, worldSize: 1, members: ["producer"], timeoutMs: 10_000 }
  client.send({ _tag: "GroupCreate", reqId: 1, setup })
  const gather = (await nextReply()).reply
  expect(gather).toMatchObject({ _tag: "AllGather", group: "g", groupId: 1 })
  client.send({ _tag: "AllGathered", reqId: gather.reqId, blobs: [new Uint8Array([0])] })
  // Past the rendezvous, the transport connects: the owner gives up meanwhile.
  client.send({ _tag: "GroupDestroy", reqId: 3, name: "g", backend: "held-groups" })
  expect((await nextReply()).reply).toMatchObject({ _tag: "Done", reqId: 3 })
  finishCreations()
  expect((await nextReply()).reply).toMatchObject({ _tag: "Failed", reqId: 1, error: { tag: "TransferError", message: expect.stringMatching(/abandoned/) } })
  expect(held).toEqual(new Set())
  expect(await agent.command({ op: "inspect" })).toMatchObject({ groups: [] })
})

it("fails a group's rendezvous at once when the connection that asked for the group closes", async () => {
  const setup = { id: 2, name: "h", backend: "held-groups", rank: 0, worldSize: 1, members: ["producer"], timeoutMs: 60_000 }
  client.send({ _tag: "GroupCreate", reqId: 1, setup })
  expect((await nextReply()).reply).toMatchObject({ _tag: "AllGather", group: "h" })
  const failures = rendezvousFailures.length
  client.close()
  await until(() => rendezvousFailures.length > failures, "the rendezvous to fail")
  expect(rendezvousFailures.at(-1)).toMatchObject({ _tag: "TransferError" })
})

it("ends the sends a connection asked for that still wait for their object when that connection closes", async () => {
  const setup = { id: 3, name: "s", backend: "held-groups", rank: 0, worldSize: 1, members: ["producer"], timeoutMs: 10_000 }
  client.send({ _tag: "GroupCreate", reqId: 1, setup })
  const gather = (await nextReply()).reply
  client.send({ _tag: "AllGathered", reqId: gather.reqId, blobs: [new Uint8Array([0])] })
  await until(() => {
    finishCreations()
    return replies.length > 0
  }, "the group")
  expect((await nextReply()).reply).toMatchObject({ _tag: "Done", reqId: 1 })
  // Another connection asks for sends of objects that are never registered here.
  const other = await connect(join(dir, "agent.sock"), { onFrame: () => undefined })
  for (let i = 0; i < 3; i++) {
    other.send({ _tag: "Send", reqId: 10 + i, objectId: `never.${i}`, transport: "held-groups", group: "s", to: "consumer", toRank: 0, timeoutMs: 10_000, whenRegistered: true })
  }
  const pending = async () => ((await agent.command({ op: "inspect" })) as { pendingTransfers: Array<string> }).pendingTransfers
  const deadline = Date.now() + 5_000
  while ((await pending()).length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  expect(await pending()).toHaveLength(3)
  other.close()
  while ((await pending()).length > 0 && Date.now() < deadline + 5_000) await new Promise((resolve) => setTimeout(resolve, 5))
  expect(await pending()).toEqual([])
  client.send({ _tag: "GroupDestroy", reqId: 20, name: "s", backend: "held-groups" })
  expect((await nextReply()).reply).toMatchObject({ _tag: "Done", reqId: 20 })
})
