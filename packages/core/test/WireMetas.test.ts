/**
 * Tensor metadata as it travels: what a producer writes is read back as it was, and what a hostile
 * or broken peer can write is refused with ProtocolError, before anything is allocated for it.
 */
import { describe, expect, it } from "vitest"
import { InvalidArgumentError, ProtocolError } from "../src/Errors.js"
import { MAX_META_NAMES, metaBytes, metaCount, metasProblem, readMetas, writeMetas } from "../src/internal/wireMetas.js"

/** Wire bytes written by hand: a count, then per tensor [dtype's place, device's place, dims]. */
const wire = (tensors: ReadonlyArray<readonly [number, number, ReadonlyArray<number>]>, count = tensors.length, extra = 0): Uint8Array => {
  const bytes = new Uint8Array(4 + tensors.reduce((n, [, , dims]) => n + 4 + 8 * dims.length, 0) + extra)
  const view = new DataView(bytes.buffer)
  view.setUint32(0, count, true)
  let at = 4
  for (const [dtype, device, dims] of tensors) {
    view.setUint8(at, dtype)
    view.setUint8(at + 1, device)
    view.setUint16(at + 2, dims.length, true)
    at += 4
    for (const d of dims) {
      view.setFloat64(at, d, true)
      at += 8
    }
  }
  return bytes
}

describe("tensor metadata on the wire", () => {
  it("reads back what was written, each tensor's bytes counted from its dtype and shape", () => {
    const metas = [
      { dtype: "float32", shape: [2, 3], device: "cpu" },
      { dtype: "bfloat16", shape: [], device: "cuda:1" },
      { dtype: "int64", shape: [0, 5], device: "cpu" },
      { dtype: "float32", shape: [2 ** 40], device: "cuda:1" },
    ]
    const written = writeMetas(metas)
    expect(written.names).toEqual(["float32", "cpu", "bfloat16", "cuda:1", "int64"])
    expect(readMetas(written)).toEqual([
      { ...metas[0], nbytes: 24 },
      { ...metas[1], nbytes: 2 },
      { ...metas[2], nbytes: 0 },
      { ...metas[3], nbytes: 2 ** 42 },
    ])
    expect(metaCount(written)).toBe(4)
    expect(metaBytes(written)).toBe(24 + 2 + 2 ** 42)
    expect(metasProblem(written)).toBeUndefined()
    expect(readMetas(writeMetas([]))).toEqual([])
  })

  it("takes 12 bytes a tensor of one dimension", () => {
    const metas = Array.from({ length: 1024 }, () => ({ dtype: "float32", shape: [1024], device: "cpu" }))
    expect(writeMetas(metas).bytes.byteLength).toBe(4 + 1024 * 12)
  })

  const names = ["float32", "cpu", "float128", "tpu:0", "cuda:"]
  it.each([
    ["no count", new Uint8Array(3)],
    ["a count of more tensors than its bytes hold", wire([], 2 ** 32 - 1)],
    ["bytes ending inside a tensor's dimensions", wire([[0, 1, [4, 4]]]).subarray(0, 20)],
    ["bytes past its last tensor", wire([[0, 1, [4]]], 1, 3)],
    ["a dtype's place past its names", wire([[9, 1, [4]]])],
    ["a device's place past its names", wire([[0, 200, [4]]])],
    ["an unknown dtype", wire([[2, 1, [4]]])],
    ["a device that is a dtype", wire([[0, 0, [4]]])],
    ["an unknown device", wire([[0, 3, [4]]])],
    ["a device with no index", wire([[0, 4, [4]]])],
    ["a negative dimension", wire([[0, 1, [-2, -3]]])],
    ["a fractional dimension", wire([[0, 1, [2.5, 2]]])],
    ["a dimension that is not a number", wire([[0, 1, [Number.NaN]]])],
    ["an infinite dimension", wire([[0, 1, [Infinity]]])],
    ["more elements than can be addressed", wire([[0, 1, [2 ** 30, 2 ** 30, 2 ** 30]]])],
    ["more elements than can be addressed beside a zero dimension (strides would overflow)", wire([[0, 1, [0, 2 ** 52, 2 ** 52]]])],
    ["more dimensions than a tensor has", wire([[0, 1, new Array(65).fill(1)]])],
    ["more bytes than can be addressed", wire([[0, 1, [2 ** 52]]])],
    ["more bytes in all than can be addressed", wire([[0, 1, [2 ** 50]], [0, 1, [2 ** 50]], [0, 1, [2 ** 50]]])],
  ])("refuses %s with ProtocolError", (_name, bytes) => {
    expect(() => readMetas({ names, bytes })).toThrow(ProtocolError)
    expect(() => metaBytes({ names, bytes })).toThrow(ProtocolError)
    expect(metasProblem({ names, bytes })).toEqual(expect.any(String))
  })

  it(`writes at most ${MAX_META_NAMES} names`, () => {
    expect(() => writeMetas(Array.from({ length: MAX_META_NAMES }, (_, i) => ({ dtype: "uint8", shape: [1], device: `cuda:${i}` })))).toThrow(InvalidArgumentError)
  })

  it("reads a tensor of 64 dimensions, a dimension of -0 as 0", () => {
    expect(readMetas(writeMetas([{ dtype: "uint8", shape: new Array(64).fill(1), device: "cpu" }]))[0]!.shape).toHaveLength(64)
    expect(Object.is(readMetas({ names, bytes: wire([[0, 1, [-0, 3]]]) })[0]!.shape[0], 0)).toBe(true)
  })

  it(`refuses more than ${MAX_META_NAMES} names`, () => {
    expect(() => readMetas({ names: Array.from({ length: MAX_META_NAMES + 1 }, () => "cpu"), bytes: wire([]) })).toThrow(ProtocolError)
  })
})
