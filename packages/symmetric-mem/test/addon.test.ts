/**
 * The native addon on its own: segments created, opened by name and through /proc, refused when
 * the token, name or range is wrong; SharedArrayBuffers over a segment shared with a worker thread
 * (the transfer agent's situation) and surviving that worker's exit; nothing left in /dev/shm.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { Worker } from "node:worker_threads"
import { afterEach, describe, expect, it } from "vitest"
import { loadAddon } from "../src/Loader.ts"

const addon = loadAddon()
const keys: Array<string> = []
const fresh = () => {
  const id = randomBytes(6).toString("hex")
  keys.push(`a-${id}`, `b-${id}`)
  return { a: `a-${id}`, b: `b-${id}`, name: `/tensorlane-sym-addon-test-${id}` }
}

afterEach(() => {
  for (const key of keys.splice(0)) addon.detachSegment(key)
})

describe("segments", () => {
  it("are created once (O_EXCL), opened by name with their token, unlinked, and share their bytes", async () => {
    const { a, b, name } = fresh()
    const token = addon.createSegment(a, name, 1 << 20)
    expect(token).toMatch(/^[0-9a-f]{32}$/)
    expect(() => addon.createSegment(`${a}-again`, name, 1 << 20)).toThrow(/shm_open.*File exists/)
    expect(addon.openSegment(b, name, token)).toBe(1 << 20)
    expect(addon.countOpener(b)).toBe(1)
    expect(addon.countOpener(b)).toBe(2)
    addon.unlinkSegment(name)
    addon.unlinkSegment(name)
    expect(fs.existsSync(`/dev/shm${name}`)).toBe(false)
    const mine = new Uint8Array(addon.segmentBuffer(a)!)
    const theirs = new Uint8Array(addon.segmentBuffer(b)!)
    mine[12345] = 77
    expect(theirs[12345]).toBe(77)
    expect(addon.locate(mine.subarray(100, 200))).toEqual({ key: expect.stringMatching(/^[ab]-/), offset: 100 })
    expect(addon.locate(new Uint8Array(100))).toBeUndefined()
  })

  it("refuse a wrong token, a bad name and reads out of range", async () => {
    const { a, b, name } = fresh()
    const token = addon.createSegment(a, name, 4096)
    try {
      expect(() => addon.openSegment(b, name, "0".repeat(32))).toThrow(expect.objectContaining({ code: "protocol" }))
      expect(() => addon.createSegment(b, "no-slash", 16)).toThrow(expect.objectContaining({ code: "usage" }))
      expect(() => addon.createSegment(b, "/a/b", 16)).toThrow(expect.objectContaining({ code: "usage" }))
      const info = addon.segmentInfo(a)!
      expect(info).toEqual({ token, fd: expect.any(Number), pid: process.pid, dataBytes: 4096 })
      addon.openPeerSegment(b, process.pid, info.fd, token)
      // A peer's segment is read only through readSegment, bounds-checked.
      expect(() => addon.segmentBuffer(b)).toThrow(expect.objectContaining({ code: "usage" }))
      expect(() => addon.readSegment(b, 4000, new Uint8Array(200))).toThrow(expect.objectContaining({ code: "protocol" }))
      expect(() => addon.readSegment(b, 2 ** 52, new Uint8Array(1))).toThrow(expect.objectContaining({ code: "protocol" }))
      expect(() => addon.readSegment(b, -1, new Uint8Array(1))).toThrow(expect.objectContaining({ code: "protocol" }))
      expect(() => addon.openPeerSegment(`${b}-2`, process.pid, 99999, token)).toThrow(expect.objectContaining({ code: "system" }))
      expect(() => addon.openPeerSegment(`${b}-3`, process.pid, info.fd, "f".repeat(32))).toThrow(expect.objectContaining({ code: "protocol" }))
      new Uint8Array(addon.segmentBuffer(a)!).fill(5, 10, 20)
      const out = new Uint8Array(10)
      await addon.readSegment(b, 10, out)
      expect([...out]).toEqual(new Array(10).fill(5))
    } finally {
      addon.unlinkSegment(name)
    }
  })

  it("a SharedArrayBuffer over a segment reaches a worker thread by reference and outlives its exit", async () => {
    const { a, name } = fresh()
    addon.createSegment(a, name, 1 << 16)
    addon.unlinkSegment(name)
    const memory = addon.segmentBuffer(a)!
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads")
       const view = new Uint8Array(workerData)
       view[7] = 42
       parentPort.postMessage(view[8])`,
      { eval: true, workerData: memory },
    )
    new Uint8Array(memory)[8] = 9
    expect(await new Promise((resolve) => worker.once("message", resolve))).toBe(9)
    await worker.terminate()
    expect(new Uint8Array(memory)[7]).toBe(42)
  })

  it("a worker that created its own segments exits cleanly (the addon stays loaded for their release)", async () => {
    const worker = new Worker(
      `const { parentPort, workerData } = require("node:worker_threads")
       const addon = require(workerData.addon)
       addon.createSegment("w", workerData.name, 1 << 20)
       addon.unlinkSegment(workerData.name)
       new Uint8Array(addon.segmentBuffer("w")).fill(1)
       addon.detachSegment("w")
       // Kept running until terminated: a worker that ended on its own first would make terminate() resolve undefined.
       setInterval(() => undefined, 1000)
       parentPort.postMessage("ready")`,
      { eval: true, workerData: { addon: new URL("../build/Release/tensorlane_symmetric.node", import.meta.url).pathname, name: fresh().name } },
    )
    expect(await new Promise((resolve) => worker.once("message", resolve))).toBe("ready")
    expect(await worker.terminate()).toBe(1)
  })
})

describe("in-place exports", () => {
  it("are pinned by object until released, and found by any overlapping range, from any thread's view of the bytes", () => {
    const { a, name } = fresh()
    addon.createSegment(a, name, 1 << 16)
    addon.unlinkSegment(name)
    const heap = new Uint8Array(addon.segmentBuffer(a)!)
    const other = new Uint8Array(addon.segmentBuffer(a)!)
    addon.pinExport("obj.1", heap.subarray(256, 512))
    addon.pinExport("obj.2", heap.subarray(1024, 1025))
    expect(addon.exportsOver(other.subarray(0, 256))).toEqual([])
    expect(addon.exportsOver(other.subarray(511, 1024))).toEqual(["obj.1"])
    expect([...addon.exportsOver(other.subarray(0, 4096))].sort()).toEqual(["obj.1", "obj.2"])
    expect(addon.exportsOver(other.subarray(300, 300))).toEqual([])
    expect(addon.releaseExport("obj.1")).toBe(true)
    expect(addon.releaseExport("obj.1")).toBe(false)
    expect(addon.exportsOver(other.subarray(0, 4096))).toEqual(["obj.2"])
    expect(addon.releaseExport("obj.2")).toBe(true)
  })
})

describe("reserving a segment's pages", () => {
  it("posix_fallocate: a range /dev/shm cannot back is refused (false, ENOSPC) before any page is taken; others are taken", () => {
    const { a, b, name } = fresh()
    const { blocks, bsize } = fs.statfsSync("/dev/shm")
    // Sparse: a segment larger than /dev/shm costs address space only.
    const token = addon.createSegment(a, name, blocks * bsize + 2 ** 21)
    addon.unlinkSegment(name)
    expect(addon.reserveSegment(a, 0, blocks * bsize + 2 ** 20)).toBe(false)
    expect(addon.reserveSegment(a, 2 ** 20, 2 ** 20)).toBe(true)
    expect(addon.reserveSegment(a, 0, 0)).toBe(true)
    expect(() => addon.reserveSegment(a, blocks * bsize, 2 ** 22)).toThrow(expect.objectContaining({ code: "usage", message: expect.stringContaining("leaves the segment") }))
    expect(() => addon.reserveSegment(a, -1, 1)).toThrow(expect.objectContaining({ code: "protocol" }))
    addon.openPeerSegment(b, process.pid, addon.segmentInfo(a)!.fd, token)
    expect(() => addon.reserveSegment(b, 0, 1)).toThrow(expect.objectContaining({ code: "usage", message: expect.stringContaining("read only") }))
  })
})

describe("a segment whose creation fails", () => {
  it("leaves no name, fd or mapping when its token cannot be drawn (getrandom failing: an LD_PRELOAD test double)", () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-getrandom-"))
    try {
      const double = join(dir, "failingGetrandom.so")
      execFileSync("cc", ["-shared", "-fPIC", "-o", double, new URL("doubles/failingGetrandom.c", import.meta.url).pathname, "-ldl"])
      const name = fresh().name
      // A child process, so that the double is preloaded before the addon binds getrandom.
      const script = `
        const fs = require("node:fs")
        const addon = require(process.argv[1])
        const name = process.argv[2]
        const fds = () => fs.readdirSync("/proc/self/fd").length
        const maps = () => fs.readFileSync("/proc/self/maps", "utf8").split("\\n").filter((l) => l.includes(name)).length
        const before = fds()
        let error
        process.env.TENSORLANE_TEST_FAIL_GETRANDOM = "1"
        try { addon.createSegment("k", name, 1 << 20) } catch (e) { error = { code: e.code, message: e.message } }
        delete process.env.TENSORLANE_TEST_FAIL_GETRANDOM
        console.log(JSON.stringify({ error, fds: fds() - before, maps: maps(), named: fs.existsSync("/dev/shm" + name) }))`
      const addonPath = new URL("../build/Release/tensorlane_symmetric.node", import.meta.url).pathname
      const out = execFileSync(process.execPath, ["-e", script, addonPath, name], { env: { ...process.env, LD_PRELOAD: double }, encoding: "utf8" })
      expect(JSON.parse(out)).toEqual({ error: { code: "system", message: expect.stringContaining("getrandom") }, fds: 0, maps: 0, named: false })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
