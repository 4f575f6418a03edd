/**
 * Where the device's event-loop thread (the one that moves every byte of the process's transfers)
 * may run: the CPUs TENSORLANE_GLOO_DEVICE_CPUS lists, else the share of the first group's rank
 * when that group asks for it (the transport's groups do not), else anywhere. Each case in a fresh
 * process: a process opens its device once.
 */
import { describe, expect, it } from "vitest"
import { allowedList, cpusOfList } from "./fixtures/cpus.mjs"
import { inFreshProcess } from "./fixtures/freshProcess.ts"

/** The fresh processes read their threads' CPUs with the tests' own module. */
const cpusModule = new URL("./fixtures/cpus.mjs", import.meta.url).href

interface Opened {
  readonly error?: { readonly code: string; readonly message: string; readonly variable?: string; readonly value?: string; readonly accepts?: string }
  /** Cpus_allowed_list of every thread of the process, main thread first. */
  readonly threads: ReadonlyArray<string>
}

/** Runs `open` (which opens the device) and reports what it threw and every thread's CPUs. */
const program = (open: string) => `
  const { threadLists } = await import(${JSON.stringify(cpusModule)})
  const { loadGlooAddon } = await import("@tensorlane/transport-gloo")
  const { addon } = loadGlooAddon()
  let error
  try { ${open} } catch (e) { error = { code: e.code, message: e.message, variable: e.variable, value: e.value, accepts: e.accepts } }
  console.log(JSON.stringify({ error, threads: threadLists() }))`

const openDevice = (cpus: string | undefined): Promise<Opened> =>
  inFreshProcess(program("addon.deviceAddress()"), "TENSORLANE_GLOO_DEVICE_CPUS", cpus)

/** Opens the device by creating a group (never connected) of `size` as `rank`, with `options`. */
const openByGroup = (cpus: string | undefined, rank: number, size: number, options?: unknown): Promise<Opened> =>
  inFreshProcess(program(`new addon.Group(${rank}, ${size}, 30000, ${JSON.stringify(options)}).destroy()`), "TENSORLANE_GLOO_DEVICE_CPUS", cpus)

/** The CPUs this process may run on, as the kernel lists them ("0-1"), and the last of them. */
const all = allowedList()
const allCpus = cpusOfList(all)
const last = String(allCpus[allCpus.length - 1])
const several = allCpus.length > 1

/** The threads whose CPUs differ from the process's: the device's, when it was placed. */
const placed = (opened: Opened): Array<Array<number>> => opened.threads.filter((cpus) => cpus !== all).map(cpusOfList)

describe("the gloo device thread's CPUs", () => {
  it("unset and opened outside a group, the device's thread may run anywhere, as every other thread", async () => {
    const opened = await openDevice(undefined)
    expect(opened.error).toBeUndefined()
    expect(new Set(opened.threads)).toEqual(new Set([all]))
  })

  it("unset, the first group's rank gives it its share: every CPU at the rank's position modulo the group's size", async () => {
    for (const rank of [0, 1]) {
      const opened = await openByGroup(undefined, rank, 2, { deviceCpusByRank: true })
      expect(opened.error).toBeUndefined()
      if (!several) {
        // One CPU cannot be shared out between two ranks.
        expect(placed(opened)).toEqual([])
        continue
      }
      expect(placed(opened)).toEqual([allCpus.filter((_, i) => i % 2 === rank)])
      // The thread that opened the device (here the main thread) gets its own CPUs back.
      expect(opened.threads[0]).toBe(all)
    }
  })

  it("unset, a group the transport creates leaves the device's thread on every CPU", async () => {
    // The group's peer never answers: its creation fails after the device opened.
    const opened = await inFreshProcess<Opened>(
      program(`const { gloo } = await import("@tensorlane/transport-gloo")
        await gloo.createGroup({ name: "placement", rank: 1, worldSize: 2, members: ["a", "b"], timeoutMs: 5000, allGather: () => Promise.reject(new Error("no peer")) })`),
      "TENSORLANE_GLOO_DEVICE_CPUS",
      undefined,
    )
    expect(opened.error?.message).toMatch(/no peer/)
    expect(new Set(opened.threads)).toEqual(new Set([all]))
  })

  it("takes no share for a group of more ranks than CPUs, nor when the group does not ask, nor with the value all", async () => {
    for (const opened of [
      await openByGroup(undefined, 0, allCpus.length + 1, { deviceCpusByRank: true }),
      await openByGroup(undefined, 1, 2, {}),
      await openByGroup(undefined, 1, 2),
      await openByGroup("all", 1, 2, { deviceCpusByRank: true }),
      await openDevice("all"),
    ]) {
      expect(opened.error).toBeUndefined()
      expect(placed(opened)).toEqual([])
    }
  })

  it("restricts the device's thread, and that thread only, to the CPUs TENSORLANE_GLOO_DEVICE_CPUS lists, over a group's share", async () => {
    for (const opened of [await openDevice(last), await openByGroup(last, 0, 2, { deviceCpusByRank: true })]) {
      expect(opened.error).toBeUndefined()
      expect(opened.threads.filter((cpus) => cpus === last)).toHaveLength(several ? 1 : opened.threads.length)
      expect(opened.threads[0]).toBe(all)
    }
  })

  it("refuses what is not a CPU list, and CPUs the process may not use, as an invalid setting that says which it may", async () => {
    const invalid = (value: string, accepts: string) => ({
      code: "setting",
      message: `TENSORLANE_GLOO_DEVICE_CPUS must be ${accepts}, got "${value}"`,
      variable: "TENSORLANE_GLOO_DEVICE_CPUS",
      value,
      accepts,
    })
    for (const bad of ["x", "1-", "3-1", ",", "99999", "ALL"]) {
      const { error } = await openDevice(bad)
      expect(error, bad).toEqual(invalid(bad, "a list of CPUs (like 1 or 0,2-3), or all"))
    }
    const { error, threads } = await openDevice("1023")
    expect(error).toEqual(invalid("1023", `CPUs this process may run on (${all}), or all`))
    expect(new Set(threads)).toEqual(new Set([all]))
  })

  it("refuses group options of the wrong type", async () => {
    expect((await openByGroup(undefined, 0, 2, 5)).error).toEqual({ code: "usage", message: "options must be an object" })
    expect((await openByGroup(undefined, 0, 2, { deviceCpusByRank: 1 })).error).toEqual({
      code: "usage",
      message: "options.deviceCpusByRank must be a boolean",
    })
  })
})
