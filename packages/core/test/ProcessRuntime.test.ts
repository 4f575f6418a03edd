/**
 * A process resolving an object: once the transfer into it is under way, the runtime tells its owner
 * that the thread only waits (actors collect garbage then), after the transport started and before
 * the bytes are in. A process freeing what it produced: its agent hears only of what it registered.
 */
import * as v8 from "node:v8"
import { expect, it } from "vitest"
import { Fetches } from "../src/internal/fetches.js"
import type { AgentClient } from "../src/internal/agentClient.js"
import { ProcessRuntime } from "../src/internal/processRuntime.js"
import { writeMetas } from "../src/internal/wireMetas.js"
import { objectStoreName, objectStoreTransport } from "../src/internal/transportRegistry.js"
import { encodeValue } from "../src/internal/valueCodec.js"
import { Tensor } from "../src/Tensor.js"
import { TensorStore } from "../src/TensorStore.js"
import { defineTransport } from "../src/Transport.js"

it("calls whileReceiving once the receive is posted, while the transfer is still in flight", async () => {
  const events: Array<string> = []
  let deliver: () => void = () => {}
  // A one-sided transport that works on any thread: the runtime reads through it itself.
  const slow = defineTransport({
    name: "slow",
    capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, anyThread: true },
    fetch: ({ into }) => {
      events.push("posted")
      return new Promise<void>((resolve) => {
        deliver = () => {
          into[0].fill_(7)
          events.push("delivered")
          resolve()
        }
      })
    },
  })
  // No agent: a transport that works on any thread is never routed through one.
  const noAgent = {} as AgentClient
  const runtime = new ProcessRuntime("consumer", { id: "test", closed: false }, noAgent, new TensorStore(), new Map([["slow", slow]]), (id) => id as never, new Fetches(undefined), () => {
    events.push("waiting")
    deliver()
  })
  const tensor = Tensor.zeros([4])
  const { skeleton } = encodeValue(tensor)
  const resolved = await runtime.resolve(
    { objectId: "producer.1", producer: "producer", producerAddress: "", transport: "slow", skeleton, tensors: writeMetas([tensor]), refs: [] },
    { timeoutMs: 10_000 },
  )
  expect(events).toEqual(["posted", "waiting", "delivered"])
  expect((resolved.value as Tensor).toArray()).toEqual([7, 7, 7, 7])
})

it("tells its agent of the release of what it registered there, and of no small object-store value (never registered)", async () => {
  const commands: Array<{ op: string; objectIds?: ReadonlyArray<string> }> = []
  // TEST DOUBLE of the agent: it records the commands and answers each at once.
  const agent = {
    address: "agent.sock",
    command: (command: { op: string }) => {
      commands.push(command)
      return Promise.resolve(undefined)
    },
  } as unknown as AgentClient
  const objectStore = objectStoreTransport(() => Promise.reject(new Error("no fetch here")))
  const runtime = new ProcessRuntime("producer", { id: "test", closed: false }, agent, new TensorStore(), new Map([[objectStoreName, objectStore]]), (id) => id as never, new Fetches(undefined))
  const small = await runtime.produce("producer.1", Tensor.zeros([1024]), objectStoreName, "result")
  const large = await runtime.produce("producer.2", Tensor.zeros([1 << 18]), objectStoreName, "result")
  expect(small.inline?.byteLength).toBe(4096)
  expect(large.inline).toBeUndefined()
  await runtime.free(["producer.1", "producer.2"])
  expect(commands.map((c) => c.op)).toEqual(["register", "release"])
  expect(commands[1].objectIds).toEqual(["producer.2"])
  expect(runtime.store.inspect().primary).toEqual([])
})

it("packs a value's small tensors but those its transport holds registered, asking a transport written as a class with its own `this`", async () => {
  // TEST DOUBLE of the agent: it answers every command at once.
  const agent = { address: "agent.sock", command: () => Promise.resolve(undefined) } as unknown as AgentClient
  class Pinning {
    readonly name = "pinning"
    readonly capabilities = { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu" as const], receiveIntoBuffers: true, anyThread: true }
    readonly pinned = new Set<unknown>()
    registeredWith: Array<number> = []
    registered(storage: unknown): boolean {
      return this.pinned.has(storage)
    }
    extractMetadata({ tensors }: { tensors: ReadonlyArray<Tensor> }): undefined {
      this.registeredWith = tensors.map((t) => t.nbytes)
      return undefined
    }
    fetch(): Promise<void> {
      return Promise.reject(new Error("no fetch here"))
    }
  }
  const pinning = defineTransport(new Pinning())
  const runtime = new ProcessRuntime("producer", { id: "test", closed: false }, agent, new TensorStore(), new Map([["pinning", pinning]]), (id) => id as never, new Fetches(undefined))
  const [a, pinned, b] = [Tensor.zeros([1 << 14]), Tensor.zeros([1 << 14]), Tensor.zeros([3])]
  pinning.pinned.add(pinned.storage)
  const info = await runtime.produce("producer.1", { a, pinned, b }, "pinning", "result")
  expect([...info.packed!]).toEqual([1, 0, 1])
  // The block (a at 0, b at the next multiple of 64 bytes), then the pinned tensor as it is.
  expect(pinning.registeredWith).toEqual([(1 << 16) + 12, 1 << 16])
  await runtime.free(["producer.1"])
})

it("refuses a value whose skeleton holds a ref its object does not list among its refs, and makes the listed ones", async () => {
  const made: Array<string> = []
  const runtime = new ProcessRuntime("consumer", { id: "test", closed: false }, {} as AgentClient, new TensorStore(), new Map([[objectStoreName, objectStoreTransport(() => Promise.reject(new Error("no fetch here")))]]), (id) => {
    made.push(id)
    return id as never
  }, new Fetches(undefined))
  const skeleton = v8.serialize({ r: { "\u0000tensorlane:ref": "producer.7" } })
  const info = { objectId: "producer.1", producer: "producer", producerAddress: "", transport: objectStoreName, skeleton, tensors: writeMetas([]) }
  await expect(runtime.resolve({ ...info, refs: [] }, { timeoutMs: 1000 })).rejects.toMatchObject({ _tag: "ProtocolError", message: expect.stringContaining("does not list") })
  expect(made).toEqual([])
  expect((await runtime.resolve({ ...info, refs: ["producer.7"] }, { timeoutMs: 1000 })).value).toEqual({ r: "producer.7" })
})
