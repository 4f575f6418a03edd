/**
 * Refs that are never released are freed by garbage collection (FinalizationRegistry) in the driver;
 * actors collect the memory of freed objects while idle, so that it comes back warm.
 */
import { type ActorHandle, type Cluster, start } from "@tensorlane/core"
import { afterAll, beforeAll, expect, it } from "vitest"
import { exposedGc as gc } from "../packages/core/test/helpers/gc.ts"
import { Worker } from "./fixtures/actors.ts"
import { eventually, expectClean, TMPFILE } from "./helpers.ts"

let cluster: Cluster
let a: ActorHandle<typeof Worker>
let b: ActorHandle<typeof Worker>

beforeAll(async () => {
  cluster = await start({ transports: [TMPFILE] })
  ;[a, b] = await cluster.spawn(Worker, { count: 2 })
}, 60_000)

afterAll(() => cluster?.shutdown())

/** Makes objects and drops every handle without releasing it. */
const churn = async (): Promise<number> => {
  let total = 0
  for (const transport of ["object-store", "tmpfile"]) {
    for (const n of [1024, 1 << 20]) total += await cluster.get(b.numel(a.make.options({ tensorTransport: transport })(n)))
  }
  return total
}

it("frees objects whose refs were garbage-collected, in every store and transport", async () => {
  expect(await churn()).toBe(2 * (256 + (1 << 18)))
  const held = await cluster.inspect()
  expect(held.objects.length).toBeGreaterThan(0)
  expect(held.processes[a.actorId].registrations.length).toBeGreaterThan(0)
  const left = await eventually(
    async () => {
      gc()
      return (await cluster.inspect()).objects
    },
    (objects) => objects.length === 0,
    10_000,
  )
  expect(left).toEqual([])
  await expectClean(cluster)
})

it("an actor collects a freed result's memory after the call that came with the free, off that call's path", async () => {
  const [c] = await cluster.spawn(Worker)
  const bytes = 64 << 20
  const first = c.marked(bytes, 7)
  await cluster.get(first)
  // The next call arrives right behind the free: it takes fresh memory instead of waiting for a collection...
  first.release()
  const second = c.marked(bytes, 8)
  await cluster.get(second)
  // ...and the collection after it proves the first result's memory free: the next allocation reuses it.
  await new Promise((r) => setTimeout(r, 200))
  expect(await cluster.get(c.firstByteOfNew(bytes))).toBe(7)
  second.release()
})
