/**
 * The driver's frees: those made before the event loop's next turn (the many refs one garbage
 * collection finds dead) reach each process as one Free message, in messages of at most 4096 ids,
 * unless a call to that process takes them first; none reaches a dead process.
 */
import { expect, it } from "vitest"
import type { ActorProcesses, ActorRecord } from "../src/internal/driver/ActorProcesses.js"
import type { AgentLinks } from "../src/internal/driver/AgentLinks.js"
import type { DriverContext } from "../src/internal/driver/DriverContext.js"
import type { Groups } from "../src/internal/driver/Groups.js"
import { Objects } from "../src/internal/driver/Objects.js"
import type { ToActor } from "../src/internal/messages.js"
import type { Entry } from "../src/internal/objectDirectory.js"
import { writeMetas } from "../src/internal/wireMetas.js"

// TEST DOUBLES of the actor records: each records the messages sent to it.
const recordOf = (id: string, alive = true) => {
  const sent: Array<ToActor> = []
  return { sent, record: { id, alive, control: { send: (message: ToActor) => sent.push(message) } } as unknown as ActorRecord }
}

const objectsWith = (records: ReadonlyArray<ActorRecord>): Objects => {
  const processes = { get: (id: string) => records.find((r) => r.id === id) } as unknown as ActorProcesses
  return new Objects({} as DriverContext, processes, {} as AgentLinks, {} as Groups)
}

/** A ready object of `producer` holding one tensor, with received copies in `copies`. */
const entryOf = (id: string, producer: string, copies: ReadonlyArray<string> = []): Entry =>
  ({ id, producer, info: { tensors: writeMetas([{ dtype: "float32", shape: [1], device: "cpu" }]) }, copies: new Set(copies) }) as unknown as Entry

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

it("sends the frees made before the next turn to each process as one message, then", async () => {
  const a = recordOf("A-0")
  const b = recordOf("B-0")
  const objects = objectsWith([a.record, b.record])
  for (let i = 0; i < 3; i++) objects.free(entryOf(`A-0.${i}`, "A-0", i === 0 ? ["B-0"] : []))
  await Promise.resolve()
  expect(a.sent).toEqual([])
  await nextTurn()
  expect(a.sent).toEqual([{ _tag: "Free", objectIds: ["A-0.0", "A-0.1", "A-0.2"] }])
  expect(b.sent).toEqual([{ _tag: "Free", objectIds: ["A-0.0"] }])
  objects.free(entryOf("A-0.3", "A-0"))
  await nextTurn()
  expect(a.sent).toHaveLength(2)
  expect(a.sent[1]).toEqual({ _tag: "Free", objectIds: ["A-0.3"] })
})

it("splits a large batch into messages of at most 4096 ids, and sends nothing to a dead process", async () => {
  const a = recordOf("A-0")
  const dead = recordOf("D-0", false)
  const objects = objectsWith([a.record, dead.record])
  for (let i = 0; i < 5000; i++) objects.free(entryOf(`A-0.${i}`, "A-0"))
  objects.free(entryOf("D-0.1", "D-0"))
  await nextTurn()
  expect(a.sent.map((m) => (m as { objectIds: ReadonlyArray<string> }).objectIds.length)).toEqual([4096, 904])
  expect(dead.sent).toEqual([])
})

it("hands the frees gathered for a process to a call about to go to it, and then sends none of them", async () => {
  const a = recordOf("A-0")
  const b = recordOf("B-0")
  const objects = objectsWith([a.record, b.record])
  objects.free(entryOf("A-0.1", "A-0"))
  objects.free(entryOf("A-0.2", "A-0"))
  objects.free(entryOf("B-0.1", "B-0"))
  expect(objects.takeFrees(a.record)).toEqual(["A-0.1", "A-0.2"])
  expect(objects.takeFrees(a.record)).toBeUndefined()
  await nextTurn()
  expect(a.sent).toEqual([])
  expect(b.sent).toEqual([{ _tag: "Free", objectIds: ["B-0.1"] }])
})

it("leaves more frees than one message holds to their own messages", async () => {
  const a = recordOf("A-0")
  const objects = objectsWith([a.record])
  for (let i = 0; i <= 4096; i++) objects.free(entryOf(`A-0.${i}`, "A-0"))
  expect(objects.takeFrees(a.record)).toBeUndefined()
  await nextTurn()
  expect(a.sent.map((m) => (m as { objectIds: ReadonlyArray<string> }).objectIds.length)).toEqual([4096, 1])
})
