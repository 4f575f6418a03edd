/**
 * The transport inside one process: registration reference counts (seed 000's semantics), the
 * registered pool, the library search order, and every malformed-metadata path, which must end in
 * a ProtocolError before NIXL (whose deserializer aborts on garbage) sees anything; and READs from a
 * producer process whose pieces lie in different registrations.
 */
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Tensor } from "@tensorlane/core"
import { libraryCacheDir } from "@tensorlane/core/native"
import { afterEach, describe, expect, it, vi } from "vitest"
import {
  type NixlMetadata,
  createNixlMemoryPool,
  deregisterNixlMemory,
  libraryCandidates,
  loadNixl,
  nixl,
  nixlRegistrationRefs,
  nixlStatus,
  registerNixlMemory,
} from "../src/index.js"
import { rejection, tagOf, thrown } from "../../core/test/helpers/errors.ts"
import { nixlSettings } from "../src/internal/settings.js"
import { runPeers } from "./fixtures/runPeers.ts"

const ADJACENT_PEERS = fileURLToPath(new URL("./fixtures/adjacentPeers.mjs", import.meta.url))

const registrations = () => nixl.inspect!().registrations

describe("registration", () => {
  it("registers a storage once, counts every pin, and deregisters with the last one", () => {
    const weight = Tensor.randn([100, 100])
    const row = weight.row(3)
    expect(nixlRegistrationRefs(weight)).toBe(0)
    registerNixlMemory(weight)
    registerNixlMemory(row)
    expect(nixlRegistrationRefs(weight)).toBe(2)
    expect(registrations()).toHaveLength(1)
    deregisterNixlMemory(row)
    expect(nixlRegistrationRefs(weight)).toBe(1)
    deregisterNixlMemory(weight)
    expect(nixlRegistrationRefs(weight)).toBe(0)
    expect(registrations()).toEqual([])
    expect(tagOf(thrown(() => deregisterNixlMemory(weight)))).toBe("UnsupportedOperationError")
  })

  it("an object of 1000 views of one storage takes one reference; release gives it back", async () => {
    const weight = Tensor.randn([1000, 100])
    const views = Array.from({ length: 1000 }, (_, i) => weight.row(i))
    const metadata = (await nixl.extractMetadata!({ objectId: "o1", tensors: views })) as NixlMetadata
    expect(metadata.regions).toHaveLength(1)
    expect(metadata.tensors).toHaveLength(1000)
    expect(metadata.tensors[999].offset).toBe(999 * 100 * 4)
    expect(nixlRegistrationRefs(weight)).toBe(1)
    await nixl.release!({ objectId: "o1", tensors: views })
    expect(nixlRegistrationRefs(weight)).toBe(0)
    expect(registrations()).toEqual([])
  })
})

describe("registered memory pool", () => {
  it("one registration for every block; a typed error naming its size; blocks come back", async () => {
    const pool = createNixlMemoryPool({ capacity: 1 << 16, name: "unit" })
    expect(registrations()).toHaveLength(1)
    const a = Tensor.empty([8192], { allocator: pool })
    expect(nixlRegistrationRefs(a)).toBe(1)
    const metadata = (await nixl.extractMetadata!({ objectId: "p1", tensors: [a] })) as NixlMetadata
    expect(registrations()).toHaveLength(1)
    expect(metadata.regions[0].length).toBe(1 << 16)
    expect(nixlRegistrationRefs(a)).toBe(2)
    await nixl.release!({ objectId: "p1", tensors: [a] })
    const error = thrown(() => Tensor.empty([16384], { allocator: pool }))
    expect(tagOf(error)).toBe("OutOfMemoryError")
    expect((error as Error).message).toContain("65536 bytes")
    pool.free(a.storage)
    expect(pool.used).toBe(0)
    const b = Tensor.empty([16384], { allocator: pool })
    expect(b.nbytes).toBe(1 << 16)
    pool.free(b.storage)
    pool.close()
    expect(registrations()).toEqual([])
    expect(tagOf(thrown(() => pool.allocate(8)))).toBe("UnsupportedOperationError")
  })
})

describe("library search", () => {
  it("tries NIXL_LIB_DIR first, then the user cache, then <repo>/.tools/libraries, then site-packages, then the system path", () => {
    const saved = process.env.NIXL_LIB_DIR
    process.env.NIXL_LIB_DIR = "/opt/somewhere"
    try {
      const candidates = libraryCandidates()
      expect(candidates[0]).toBe("/opt/somewhere/libnixl_capi.so")
      const inWheel = "nixl_cu12-1.5.1/.nixl_cu12.mesonpy.libs/libnixl_capi.so"
      expect(candidates[1]).toBe(join(libraryCacheDir(), inWheel))
      expect(candidates.findIndex((c) => c.endsWith(`/.tools/libraries/${inWheel}`))).toBeGreaterThan(1)
      expect(candidates.at(-1)).toBe("libnixl_capi.so")
    } finally {
      if (saved === undefined) delete process.env.NIXL_LIB_DIR
      else process.env.NIXL_LIB_DIR = saved
    }
    expect(loadNixl().library).toMatch(/libnixl_capi\.so$/)
    // Earlier tests registered memory, which created this process's agent.
    expect(nixlStatus()).toMatchObject({ library: loadNixl().library, agent: expect.stringMatching(/^tensorlane-/), registrations: [] })
  })
})

describe("settings", () => {
  afterEach(() => vi.unstubAllEnvs())

  it("reads the error mode, extra UCX parameters, the progress delay and the READs' bytes done here, and refuses a value one does not accept with an InvalidSettingError naming it, instead of a default or a dropped pair", () => {
    expect(nixlSettings()).toMatchObject({ backendParams: [["ucx_error_handling_mode", "peer"]], progressDelayUs: 100_000, readHereBytes: 16 * 2 ** 20 })
    vi.stubEnv("TENSORLANE_NIXL_ERROR_MODE", "none")
    vi.stubEnv("TENSORLANE_NIXL_UCX_PARAMS", "a=1, b = 2")
    vi.stubEnv("TENSORLANE_NIXL_PROGRESS_DELAY_US", "0")
    vi.stubEnv("TENSORLANE_NIXL_READ_HERE_BYTES", "0")
    expect(nixlSettings()).toMatchObject({
      backendParams: [
        ["ucx_error_handling_mode", "none"],
        ["a", "1"],
        ["b", "2"],
      ],
      progressDelayUs: 0,
      readHereBytes: 0,
    })
    vi.unstubAllEnvs()
    for (const [variable, value] of [
      ["TENSORLANE_NIXL_ERROR_MODE", "Peer"],
      ["TENSORLANE_NIXL_UCX_PARAMS", "a=1,b"],
      ["TENSORLANE_NIXL_UCX_PARAMS", "=1"],
      ["TENSORLANE_NIXL_PROGRESS_DELAY_US", "-1"],
      ["TENSORLANE_NIXL_PROGRESS_DELAY_US", "100ms"],
      ["TENSORLANE_NIXL_READ_HERE_BYTES", "-1"],
      ["TENSORLANE_NIXL_READ_HERE_BYTES", "16MiB"],
    ]) {
      vi.stubEnv(variable, value)
      expect(() => nixlSettings(), `${variable}=${value}`).toThrow(expect.objectContaining({ _tag: "InvalidSettingError", variable, value }))
      vi.unstubAllEnvs()
    }
  })
})

/** A NIXL blob whose Agent record (the first, after "nixlSerDes|") names `agent` instead. */
const renamed = (blob: Uint8Array, agent: string): Uint8Array => {
  const head = new TextEncoder().encode("nixlSerDes|Agent")
  const view = new DataView(blob.buffer, blob.byteOffset)
  const rest = blob.subarray(head.length + 8 + Number(view.getBigUint64(head.length, true)))
  const name = new TextEncoder().encode(agent)
  const out = new Uint8Array(head.length + 8 + name.length + rest.length)
  out.set(head)
  new DataView(out.buffer).setBigUint64(head.length, BigInt(name.length), true)
  out.set(name, head.length + 8)
  out.set(rest, head.length + 8 + name.length)
  return out
}

describe("hostile metadata gives ProtocolError, never a crash", () => {
  const producerSide = async () => {
    const source = Tensor.arange(1024, { dtype: "float32" })
    const metadata = (await nixl.extractMetadata!({ objectId: "h1", tensors: [source] })) as NixlMetadata
    return { source, metadata }
  }
  const fetchWith = (metadata: unknown, into = [Tensor.zeros([1024], { dtype: "float32" })]) =>
    rejection(
      nixl.fetch!({
        objectId: "h1",
        producer: "peer",
        producerAddress: "",
        consumer: "me",
        tensors: into.map((t) => ({ dtype: t.dtype, shape: t.shape, device: t.device, nbytes: t.nbytes })),
        metadata,
        into,
        signal: new AbortController().signal,
      }),
    )

  it.each([
    ["not an object", () => 42],
    ["an unknown version", (m: NixlMetadata) => ({ ...m, version: 2 })],
    ["zeros instead of a NIXL blob", (m: NixlMetadata) => ({ ...m, agent: "x", blob: new Uint8Array(100) })],
    ["a truncated blob", (m: NixlMetadata) => ({ ...m, agent: "x", blob: m.blob.subarray(0, 120) })],
    ["a blob of another agent", (m: NixlMetadata) => ({ ...m, agent: "someone-else" })],
    ["an agent name that a NUL would cut short, in the blob as well", (m: NixlMetadata) => ({ ...m, agent: `${m.agent}\0other`, blob: renamed(m.blob, `${m.agent}\0other`) })],
    ["this process's own agent", (m: NixlMetadata) => m],
    ["a descriptor beyond its region", (m: NixlMetadata) => ({ ...m, tensors: [{ ...m.tensors[0], offset: 8 }] })],
    ["a region the blob does not register", (m: NixlMetadata) => ({ ...m, regions: [{ ...m.regions[0], address: m.regions[0].address + 4096n }] })],
    ["an undeclared region", (m: NixlMetadata) => ({ ...m, tensors: [{ ...m.tensors[0], region: 3 }] })],
    ["an overflowing stride", (m: NixlMetadata) => ({ ...m, tensors: [{ ...m.tensors[0], shape: [2, 512], strides: [2 ** 52, 1] }] })],
    ["a wrong tensor count", (m: NixlMetadata) => ({ ...m, tensors: [] })],
  ])("%s", async (_what, mutate) => {
    const { source, metadata } = await producerSide()
    const error = await fetchWith(mutate(metadata as never))
    expect(tagOf(error)).toBe("ProtocolError")
    await nixl.release!({ objectId: "h1", tensors: [source] })
    expect(registrations()).toEqual([])
  })
})

describe("READs across registrations", () => {
  it("pieces adjacent in memory but in different registrations, at either end, are READ each in its own descriptor", async () => {
    const run = await runPeers([], {}, { script: ADJACENT_PEERS })
    const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i)
    expect(run.result).toEqual({ halvesIntoBlocks: [range(0, 16), range(16, 16)], blocksIntoOneStorage: [range(100, 16), range(200, 16)] })
    expect(run.code).toBe(0)
  })
})
