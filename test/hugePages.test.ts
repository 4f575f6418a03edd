/**
 * Actors ask glibc for transparent huge pages on their large allocations (GLIBC_TUNABLES
 * glibc.malloc.hugetlb=1, set by the launcher): a tensor's fresh storage faults once per 2 MiB
 * instead of once per 4 KiB page. An actor whose environment sets the tunable keeps its value.
 * Checked where the kernel offers huge pages on request ("madvise" or "always") and glibc reads the
 * tunable (2.35 and later); elsewhere the variable changes nothing and the tests skip.
 */
import { existsSync, readFileSync } from "node:fs"
import { type Cluster, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Worker } from "./fixtures/actors.ts"

const THP = "/sys/kernel/mm/transparent_hugepage/enabled"
/** The kernel's mode, the bracketed word of "always [madvise] never". */
const mode = existsSync(THP) ? /\[(\w+)\]/.exec(readFileSync(THP, "utf8"))?.[1] : undefined
const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime
const [major = 0, minor = 0] = (glibc ?? "").split(".").map(Number)
const readsTunable = major > 2 || (major === 2 && minor >= 35)
const BYTES = 64 << 20

describe.skipIf(!readsTunable || (mode !== "madvise" && mode !== "always"))("huge pages in actors", () => {
  let cluster: Cluster

  beforeAll(async () => {
    cluster = await start()
  }, 60_000)

  afterAll(() => cluster?.shutdown())

  it("a fresh 64 MiB tensor of an actor lies mostly in huge pages, its other tunables kept", async () => {
    const [actor] = await cluster.spawn(Worker, { env: { GLIBC_TUNABLES: "glibc.malloc.arena_max=2" } })
    const { bytes, tunables } = await cluster.get(actor.hugePagesOfNew(BYTES))
    expect(tunables).toBe("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
    expect(bytes).toBeGreaterThanOrEqual(BYTES / 2)
  }, 60_000)

  it.skipIf(mode !== "madvise")("an actor whose environment turns the tunable off takes small pages", async () => {
    const [actor] = await cluster.spawn(Worker, { env: { GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" } })
    const { bytes, tunables } = await cluster.get(actor.hugePagesOfNew(BYTES))
    expect(tunables).toBe("glibc.malloc.hugetlb=0")
    expect(bytes).toBe(0)
  }, 60_000)
})
