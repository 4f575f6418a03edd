/**
 * Actors ask glibc for transparent huge pages on their large allocations (GLIBC_TUNABLES
 * glibc.malloc.hugetlb=1, added by the launcher): a tensor's fresh storage faults once per 2 MiB
 * instead of once per 4 KiB page. An actor whose environment sets the tunable keeps its value. What
 * glibc and the kernel do with it is checked where the kernel gives huge pages on request only
 * ("madvise"; under "always" every large mapping gets them anyway), to this process too, and glibc
 * reads the tunable (2.35 and later).
 */
import { existsSync, readFileSync } from "node:fs"
import { type Cluster, start } from "@tensorlane/core"
import { afterAll, beforeAll, expect, it } from "vitest"
import { Worker } from "./fixtures/actors.ts"

const THP = "/sys/kernel/mm/transparent_hugepage/enabled"
/** The kernel's mode, the bracketed word of "always [madvise] never". */
const mode = existsSync(THP) ? /\[(\w+)\]/.exec(readFileSync(THP, "utf8"))?.[1] : undefined
/** A process (a container's, a service's) may have huge pages turned off for it and its children. */
const thpForThisProcess = !/^THP_enabled:\s+0$/m.test(readFileSync("/proc/self/status", "utf8"))
const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime
const [major = 0, minor = 0] = (glibc ?? "").split(".").map(Number)
const readsTunable = major > 2 || (major === 2 && minor >= 35)
const checkable = mode === "madvise" && thpForThisProcess && readsTunable
const BYTES = 64 << 20

let cluster: Cluster

beforeAll(async () => {
  cluster = await start()
}, 60_000)

afterAll(() => cluster?.shutdown())

it("an actor's GLIBC_TUNABLES gains glibc.malloc.hugetlb=1 after its own, and keeps its own value of it", async () => {
  const [added, kept] = await Promise.all([
    cluster.spawn(Worker, { env: { GLIBC_TUNABLES: "glibc.malloc.arena_max=2" } }),
    cluster.spawn(Worker, { env: { GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" } }),
  ])
  expect((await cluster.get(added[0]!.hugePagesOfNew(1 << 20))).tunables).toBe("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
  expect((await cluster.get(kept[0]!.hugePagesOfNew(1 << 20))).tunables).toBe("glibc.malloc.hugetlb=0")
}, 60_000)

/** What a fresh 64 MiB tensor gets in a new actor whose GLIBC_TUNABLES are `tunables`. */
const freshTensorWith = async (tunables: string) => {
  const [actor] = await cluster.spawn(Worker, { env: { GLIBC_TUNABLES: tunables } })
  return cluster.get(actor!.hugePagesOfNew(BYTES))
}

it.skipIf(!checkable)("a fresh 64 MiB tensor of an actor lies in a mapping glibc asked huge pages for, and gets some", async () => {
  // No tunables of its own, whatever this process was started with.
  const { asked, bytes } = await freshTensorWith("")
  expect(asked).toBe(true)
  // How many depends on the kernel finding free 2 MiB pages at that moment.
  expect(bytes).toBeGreaterThan(0)
}, 60_000)

it.skipIf(!checkable)("an actor whose environment turns the tunable off takes small pages", async () => {
  const { asked, bytes } = await freshTensorWith("glibc.malloc.hugetlb=0")
  expect(asked).toBe(false)
  expect(bytes).toBe(0)
}, 60_000)
