/**
 * TENSORLANE_GLOO_DEVICE_CPUS: the CPUs of the device's event-loop thread (the one that moves every
 * byte of the process's transfers). Each case in a fresh process: a process opens its device once.
 */
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { inFreshProcess } from "./fixtures/freshProcess.ts"

interface Opened {
  readonly error?: { readonly code: string; readonly message: string }
  /** Cpus_allowed_list of every thread of the process, main thread first. */
  readonly threads: ReadonlyArray<string>
}

/** Opens the device and reports what it said and every thread's CPUs. */
const OPEN_DEVICE = `
  import { readdirSync, readFileSync } from "node:fs"
  const { loadGlooAddon } = await import("@tensorlane/transport-gloo")
  let error
  try { loadGlooAddon().addon.deviceAddress() } catch (e) { error = { code: e.code, message: e.message } }
  const tasks = readdirSync("/proc/self/task").map(Number).sort((a, b) => a - b)
  const threads = tasks.map((t) => /Cpus_allowed_list:\\s+(\\S+)/.exec(readFileSync("/proc/self/task/" + t + "/status", "utf8"))[1])
  console.log(JSON.stringify({ error, threads }))`

const openDevice = (cpus: string | undefined): Promise<Opened> => inFreshProcess(OPEN_DEVICE, "TENSORLANE_GLOO_DEVICE_CPUS", cpus)

/** The CPUs this process may run on, as the kernel lists them ("0-1"), and the last of them. */
const all = /Cpus_allowed_list:\s+(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]
const last = String(Math.max(...all.split(/[,-]/).map(Number)))
const several = all !== last

describe("TENSORLANE_GLOO_DEVICE_CPUS", () => {
  it("unset, the device's thread may run anywhere, as every other thread", async () => {
    const opened = await openDevice(undefined)
    expect(opened.error).toBeUndefined()
    expect(new Set(opened.threads)).toEqual(new Set([all]))
  })

  it("restricts the device's thread, and that thread only, to the CPUs it lists", async () => {
    const opened = await openDevice(last)
    expect(opened.error).toBeUndefined()
    expect(opened.threads.filter((cpus) => cpus === last)).toHaveLength(several ? 1 : opened.threads.length)
    // The thread that opened the device (here the main thread) gets its own CPUs back.
    expect(opened.threads[0]).toBe(all)
  })

  it("refuses what is not a CPU list, and CPUs the process may not use, saying which it may", async () => {
    for (const bad of ["x", "1-", "3-1", ",", "99999"]) {
      const { error } = await openDevice(bad)
      expect(error, bad).toEqual({ code: "usage", message: `TENSORLANE_GLOO_DEVICE_CPUS="${bad}" is not a list of CPUs (like 1 or 0,2-3)` })
    }
    const { error, threads } = await openDevice("1023")
    expect(error).toEqual({ code: "usage", message: `TENSORLANE_GLOO_DEVICE_CPUS="1023" names no CPU this process may run on (it may run on ${all})` })
    expect(new Set(threads)).toEqual(new Set([all]))
  })
})
