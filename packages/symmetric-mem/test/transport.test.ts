/**
 * The shm transport in one process (the producer's and the consumer's halves both run here, the
 * consumer mapping this process's own segment through /proc/self's pid): objects round-trip,
 * staging is released, every malformed or hostile descriptor is refused with a typed error before
 * any byte is read out of bounds, and a segment shrunk under a read fails that read.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Tensor } from "@tensorlane/core"
import { type TensorMeta } from "@tensorlane/core/plugin"
import { afterAll, afterEach, describe, expect, it, vi } from "vitest"
import { shm } from "../src/index.ts"
import { cudaDriverLibrary, heapBytesPerRank, stagingBytes } from "../src/internal/settings.ts"
import type { ShmMetadata } from "../src/ShmMetadata.ts"

const metaOf = (t: Tensor): TensorMeta => ({ dtype: t.dtype, shape: [...t.shape], device: t.device, nbytes: t.nbytes })
let next = 0

/** Produces `tensors` as an object; returns its metadata and a fetch of it into fresh targets. */
const produce = async (tensors: ReadonlyArray<Tensor>) => {
  const objectId = `obj-${next++}`
  const metadata = (await shm.extractMetadata!({ objectId, tensors })) as ShmMetadata
  const fetchWith = async (m: unknown, into = tensors.map((t) => Tensor.zeros([...t.shape], { dtype: t.dtype })), signal = new AbortController().signal) => {
    await shm.fetch!({ objectId, producer: "p", producerAddress: "", consumer: "c", tensors: tensors.map(metaOf), metadata: m, into, signal })
    return into
  }
  return { objectId, metadata, fetchWith, release: () => shm.release!({ objectId, tensors }) }
}

afterAll(() => shm.close?.())

describe("the shm transport", () => {
  it("round-trips contiguous tensors and strided views; release gives the staging back", async () => {
    const a = Tensor.arange(1000, { dtype: "float64" })
    const strided = Tensor.arange(12, { dtype: "int64" }).view([3, 4]).transpose(0, 1)
    const empty = Tensor.zeros([0, 3])
    const o = await produce([a, strided, empty])
    expect(o.metadata).toMatchObject({ version: 1, pid: process.pid, tensors: [{ nbytes: 8000 }, { nbytes: 96 }, { nbytes: 0 }] })
    expect(shm.inspect!().registrations).toEqual([`shm staging ${o.objectId}`])
    const [ga, gs] = await o.fetchWith(o.metadata)
    expect(ga.toArray()).toEqual(a.toArray())
    expect(gs.toArray()).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])
    o.release()
    expect(shm.inspect!().registrations).toEqual([])
  })

  it("refuses malformed metadata with ProtocolError", async () => {
    const o = await produce([Tensor.ones([16])])
    const m = o.metadata
    const cases: Array<[unknown, RegExp]> = [
      [undefined, /not an object/],
      [{ ...m, version: 2 }, /unknown version/],
      [{ ...m, boot: "" }, /no boot id/],
      [{ ...m, pid: -1 }, /no pid/],
      [{ ...m, segments: [{ fd: "3", token: m.segments[0].token }] }, /segment 0/],
      [{ ...m, segments: [{ fd: 3, token: "not-hex" }] }, /segment 0/],
      [{ ...m, tensors: [] }, /describes 0 tensors, the object has 1/],
      [{ ...m, tensors: [{ segment: 4, offset: 0, nbytes: 64 }] }, /names segment 4/],
      [{ ...m, tensors: [{ segment: 0, offset: 1.5, nbytes: 64 }] }, /tensor 0 is not/],
      // Out of the segment: refused natively, before any byte is read.
      [{ ...m, tensors: [{ segment: 0, offset: 2 ** 50, nbytes: 64 }] }, /leaves the segment/],
      // Not the segment it claims to be.
      [{ ...m, segments: [{ ...m.segments[0], token: "0".repeat(32) }] }, /not the segment described/],
    ]
    for (const [metadata, message] of cases) {
      await expect(o.fetchWith(metadata)).rejects.toMatchObject({ _tag: "ProtocolError", message: expect.stringMatching(message) })
    }
    await expect(o.fetchWith({ ...m, tensors: [{ segment: 0, offset: 0, nbytes: 32 }] })).rejects.toMatchObject({ _tag: "ShapeError" })
    await expect(o.fetchWith(m, [Tensor.zeros([4, 8]).transpose(0, 1).contiguous().view([32]).view([16, 2]).select(1, 0)])).rejects.toMatchObject({
      _tag: "ShapeError",
      message: expect.stringContaining("strided"),
    })
    o.release()
  })

  it("refuses at once a descriptor naming a FIFO (whose open would wait for a writer) or a folder", async () => {
    const o = await produce([Tensor.ones([16])])
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tensorlane-shm-test-"))
    const fifo = path.join(dir, "fifo")
    execFileSync("mkfifo", [fifo])
    const fds = [fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK), fs.openSync(dir, fs.constants.O_RDONLY)]
    try {
      for (const fd of fds) {
        await expect(o.fetchWith({ ...o.metadata, segments: [{ ...o.metadata.segments[0], fd }] })).rejects.toMatchObject({
          _tag: "ProtocolError",
          message: expect.stringContaining("not a shared memory file"),
        })
      }
    } finally {
      for (const fd of fds) fs.closeSync(fd)
      fs.rmSync(dir, { recursive: true })
      o.release()
    }
  })

  it("refuses a producer of another host and one that is gone with TransferError, and honours abort", async () => {
    const o = await produce([Tensor.ones([16])])
    await expect(o.fetchWith({ ...o.metadata, boot: "another-host" })).rejects.toMatchObject({ _tag: "TransferError", message: expect.stringContaining("one host") })
    await expect(o.fetchWith({ ...o.metadata, pid: 4194000 })).rejects.toMatchObject({ _tag: "TransferError", message: expect.stringContaining("is gone") })
    const controller = new AbortController()
    controller.abort(new Error("given up"))
    await expect(o.fetchWith(o.metadata, undefined, controller.signal)).rejects.toThrow("given up")
    o.release()
  })

  it("fails a read with ProtocolError, instead of dying of SIGBUS, where the producer's segment shrank under the consumer's mapping", async () => {
    // 4 KiB is copied at once on the calling thread, 4 MiB on a worker thread.
    const objects = [await produce([Tensor.ones([1024])]), await produce([Tensor.ones([1 << 20])])]
    // Both read once: the consumer keeps the segment mapped for the next object.
    for (const o of objects) expect((await o.fetchWith(o.metadata))[0].sum()).toBe(o === objects[0] ? 1024 : 1 << 20)
    const segment = `/proc/${process.pid}/fd/${objects[0].metadata.segments[0].fd}`
    const size = fs.statSync(segment).size
    // What a hostile producer (or another process of its user) can do: cut the segment to its header page.
    fs.truncateSync(segment, 4096)
    try {
      for (const o of objects) {
        await expect(o.fetchWith(o.metadata)).rejects.toMatchObject({ _tag: "ProtocolError", message: expect.stringContaining("segment shrank under a read") })
      }
    } finally {
      fs.truncateSync(segment, size)
      for (const o of objects) o.release()
    }
    // Its size back (its pages now zero), the segment reads again.
    const again = await produce([Tensor.arange(8, { dtype: "float64" })])
    expect((await again.fetchWith(again.metadata))[0].toArray()).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    again.release()
  })

  it("refuses device tensors with DeviceError naming the device and the transport", async () => {
    const device = Tensor.fromStorage(
      { id: -1, device: "cuda:0", byteLength: 16, handle: undefined, allocator: undefined as never, get bytes(): Uint8Array { throw new Error("no host bytes") } },
      { dtype: "float32", shape: [4] },
    )
    await expect(shm.extractMetadata!({ objectId: "dev", tensors: [device] })).rejects.toMatchObject({ _tag: "DeviceError", device: "cuda:0", transport: "shm" })
  })
})

describe("the package's settings", () => {
  afterEach(() => vi.unstubAllEnvs())

  it("take byte counts and a driver library, and refuse anything else with an InvalidSettingError naming the variable", () => {
    expect([heapBytesPerRank(), stagingBytes(), cudaDriverLibrary()]).toEqual([2 ** 30, 4 * 2 ** 30, "libcuda.so.1"])
    vi.stubEnv("TENSORLANE_SHM_HEAP_BYTES", "65536")
    vi.stubEnv("TENSORLANE_CUDA_DRIVER_LIBRARY", "/opt/fake/libcuda.so.1")
    expect([heapBytesPerRank(), cudaDriverLibrary()]).toEqual([65536, "/opt/fake/libcuda.so.1"])
    for (const [variable, value, read] of [
      ["TENSORLANE_SHM_HEAP_BYTES", "1GiB", heapBytesPerRank],
      ["TENSORLANE_SHM_STAGING_BYTES", "0", stagingBytes],
    ] as const) {
      vi.stubEnv(variable, value)
      expect(read, variable).toThrow(expect.objectContaining({ _tag: "InvalidSettingError", variable, value, accepts: `a whole number of bytes from 1 to ${2 ** 46}` }))
    }
  })
})
