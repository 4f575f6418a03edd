/** What the integration tests share: waiting for frees to settle, checking that nothing leaked, expecting errors. */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import type { Cluster, ClusterInspection, GetOptions, ObjectRef } from "@tensorlane/core"
import { Effect, Metric } from "effect"
import { expect } from "vitest"

export const TMPFILE = "@tensorlane-fixtures/transport-tmpfile"
export const SOCKETPAIR = "@tensorlane-fixtures/transport-socketpair"

export { rejection, tagOf, thrown } from "../packages/core/test/helpers/errors.ts"

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * A file an actor's busy method writes as it starts (fixtures/actors.ts), and the wait for it: a test
 * cannot ask an actor whose main thread spins. The file's folder is removed by `done`.
 */
export const startedMarker = (): { file: string; started: () => Promise<void>; done: () => void } => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-test-started-"))
  const file = join(dir, "started")
  return {
    file,
    started: async () => {
      if (!(await eventually(() => fs.existsSync(file), (found) => found, 10_000))) throw new Error(`the busy method did not start within 10 s (no ${file})`)
    },
    done: () => fs.rmSync(dir, { recursive: true, force: true }),
  }
}

const leftovers = (inspection: ClusterInspection) => ({
  objects: inspection.objects,
  processes: Object.fromEntries(
    Object.entries(inspection.processes).map(([id, p]) => [
      id,
      { primary: p.primary, received: p.received, pendingTransfers: p.pendingTransfers, registrations: p.registrations },
    ]),
  ),
})

const isClean = (inspection: ClusterInspection): boolean =>
  inspection.objects.length === 0 &&
  Object.values(inspection.processes).every(
    (p) => p.primary.length + p.received.length + p.pendingTransfers.length + p.registrations.length === 0,
  )

/**
 * Frees travel as messages (owner -> producer -> its agent), so the stores empty shortly after the
 * last release: poll, then assert on the last inspection (which names whatever leaked).
 */
export const expectClean = async (cluster: Cluster, timeoutMs = 5_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  let inspection = await cluster.inspect()
  while (!isClean(inspection) && Date.now() < deadline) {
    await sleep(25)
    inspection = await cluster.inspect()
  }
  const empty = { primary: [], received: [], pendingTransfers: [], registrations: [] }
  expect(leftovers(inspection)).toEqual({
    objects: [],
    processes: Object.fromEntries(Object.keys(inspection.processes).map((id) => [id, empty])),
  })
  expect(Object.keys(inspection.processes)).toContain("driver")
}

/** Polls `check` until it holds or the time is up; returns its last result. */
export const eventually = async <A>(probe: () => A | Promise<A>, check: (a: A) => boolean, timeoutMs = 5_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  let last = await probe()
  while (!check(last) && Date.now() < deadline) {
    await sleep(25)
    last = await probe()
  }
  return last
}

/** The transfer agent socket of an actor: the newest cluster directory that holds one for its id. */
export const agentSocketOf = (actorId: string): string => {
  const candidates = fs
    .readdirSync(os.tmpdir())
    .filter((name) => name.startsWith("tensorlane-") && fs.existsSync(join(os.tmpdir(), name, `${actorId}.sock`)))
    .map((name) => join(os.tmpdir(), name))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)
  if (candidates.length === 0) throw new Error(`no agent socket for ${actorId} under ${os.tmpdir()}`)
  return join(candidates[0], `${actorId}.sock`)
}

/** Gets the value of a ref made just for this (a call's result) and releases it. */
export const take =
  (cluster: Cluster) =>
  <T>(ref: ObjectRef<T>, options?: GetOptions): Promise<T> =>
    (cluster.get(ref, options) as Promise<T>).finally(() => ref.release())

/** Bytes the driver's tensorlane_transfer_bytes counter holds for one transport, over every pair of peers. */
export const bytesMoved = async (transport: string): Promise<number> => {
  const snapshots = await Effect.runPromise(Metric.snapshot)
  return snapshots
    .filter((s) => s.id === "tensorlane_transfer_bytes" && s.type === "Counter" && s.attributes?.transport === transport)
    .reduce((n, s) => n + Number((s.state as { count: number | bigint }).count), 0)
}

/** Whether no process has this pid any more. */
export const isGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH"
  }
}
