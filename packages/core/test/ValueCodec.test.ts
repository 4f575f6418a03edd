/**
 * Values around tensors: the skeleton's round trip (nesting, shared parts, cycles, odd keys) and the
 * lifetime of what decoding returns, which decides when a received tensor's memory can be recycled.
 */
import { describe, expect, it } from "vitest"
import { decodeValue, encodeValue } from "../src/internal/valueCodec.js"
import { Tensor } from "../src/Tensor.js"
import { thrown } from "./helpers/errors.ts"
import { exposedGc as gc } from "./helpers/gc.ts"

const nextJob = () => new Promise((resolve) => setImmediate(resolve))

/** Decodes `value`'s skeleton around its own tensors. */
const roundTripSame = (value: unknown): unknown => {
  const { skeleton, tensors } = encodeValue(value)
  return decodeValue(skeleton, { tensors, ref: (id) => id })
}

/** Decodes `value`'s skeleton around fresh tensors of the same count. */
const roundTrip = (value: unknown): unknown => {
  const { skeleton, tensors } = encodeValue(value)
  const fresh = tensors.map((t) => Tensor.zeros(t.shape, { dtype: t.dtype }))
  return decodeValue(skeleton, { tensors: fresh, ref: (id) => `ref:${id}` })
}

describe("value codec", () => {
  it("puts tensors back where they were, inside arrays, objects, Maps and Sets", () => {
    const value = roundTrip({ a: [Tensor.ones([2]), 3], m: new Map([["k", Tensor.ones([4])]]), s: new Set([Tensor.ones([1])]), d: new Date(5) }) as {
      a: [Tensor, number]
      m: Map<string, Tensor>
      s: Set<Tensor>
      d: Date
    }
    expect(value.a[0].shape).toEqual([2])
    expect(value.a[1]).toBe(3)
    expect(value.m.get("k")!.shape).toEqual([4])
    expect([...value.s][0].shape).toEqual([1])
    expect(value.d.getTime()).toBe(5)
  })

  it("rebuilds tensors in the order it found them: integer keys, Map keys, a tensor at two places, a dictionary of keys, shared parts", () => {
    let n = 0
    const t = () => Tensor.zeros([++n])
    const twice = t()
    const shared = [t(), { x: t() }]
    const many = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [i % 3 === 0 ? String(i) : `k${i}`, t()]))
    const value = { b: t(), 2: t(), 1: [t(), twice], m: new Map([[t(), t()]]), s: new Set([t(), twice]), shared, again: shared, many, twice }
    const { skeleton, tensors } = encodeValue(value)
    const back = decodeValue(skeleton, { tensors, ref: (id) => id }) as typeof value
    expect(back.b).toBe(value.b)
    expect([back[2], back[1][0], back[1][1], back.twice]).toEqual([value[2], value[1][0], twice, twice])
    expect([...back.m]).toEqual([...value.m])
    expect([...back.s]).toEqual([...value.s])
    expect(back.again).toBe(back.shared)
    expect(back.shared).toEqual(shared)
    expect(Object.entries(back.many)).toEqual(Object.entries(many))
    for (const [key, tensor] of Object.entries(many)) expect(back.many[key]).toBe(tensor)
  })

  it("keeps each tensor in its place where the walk could see keys in another order: a Proxy's own order, a Map changed by a getter", () => {
    const [a, b, c] = [Tensor.zeros([1]), Tensor.zeros([2]), Tensor.zeros([3])]
    const proxy = new Proxy({ b: a, 1: b }, { ownKeys: () => ["b", "1"] })
    const fromProxy = roundTripSame({ proxy }) as { proxy: Record<string, Tensor> }
    expect([fromProxy.proxy.b, fromProxy.proxy[1]]).toEqual([a, b])
    const key = { k: 1 }
    const map = new Map<unknown, unknown>([[key, a]])
    const trap = {
      get moved() {
        map.delete(key)
        map.set(key, b)
        return 0
      },
    }
    map.set("x", trap)
    const fromMap = roundTripSame({ map, c }) as { map: Map<unknown, unknown>; c: Tensor }
    expect([...fromMap.map.values()][0]).toBe(a)
    expect(fromMap.c).toBe(c)
  })

  it("walks a Map or a Set by its brand: one without a prototype keeps its members", () => {
    const [a, b] = [Tensor.zeros([1]), Tensor.zeros([2])]
    const map = new Map<unknown, unknown>([["a", a]])
    const set = new Set<unknown>([b])
    Object.setPrototypeOf(map, null)
    Object.setPrototypeOf(set, null)
    const back = roundTripSame({ map, set }) as { map: Map<unknown, unknown>; set: Set<unknown> }
    expect(back.map.get("a")).toBe(a)
    expect([...back.set]).toEqual([b])
  })

  it("refuses what would come back as something else: a Date by inheritance only, a key kept for placeholders behind a Proxy, arrays past what a value holds", () => {
    const refKey = "\u0000tensorlane:ref"
    const lying = new Proxy({}, { ownKeys: () => [refKey], getOwnPropertyDescriptor: () => ({ value: "victim", enumerable: true, configurable: true }), get: () => "victim" })
    const sparse: Array<unknown> = []
    sparse[2 ** 32 - 2] = 1
    for (const [value, says] of [
      [{ d: Object.setPrototypeOf({ inner: { [refKey]: "victim" } }, Date.prototype) }, "value.d cannot travel to another process: it is an instance of Date"],
      [{ p: lying }, "value.p cannot travel to another process: it is an object holding a key that tensorlane keeps"],
      [{ s: sparse }, "value.s cannot travel to another process: it is an array of 4294967295 elements"],
    ] as const) {
      expect(thrown(() => encodeValue(value))).toMatchObject({ _tag: "InvalidArgumentError", message: expect.stringContaining(says) })
    }
  })

  it("keeps shared parts shared and cycles cyclic, and a key named __proto__ a key", () => {
    const shared = { t: Tensor.ones([3]) }
    const cyclic: Record<string, unknown> = { shared, again: shared }
    cyclic.self = cyclic
    const value = roundTrip(cyclic) as Record<string, any>
    expect(value.self).toBe(value)
    expect(value.again).toBe(value.shared)
    expect(value.shared.t.shape).toEqual([3])
    const odd = roundTrip(JSON.parse('{"__proto__": {"polluted": 1}}')) as Record<string, unknown>
    expect(Object.getPrototypeOf(odd)).toBe(Object.prototype)
    expect(Object.keys(odd)).toEqual(["__proto__"])
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it("keeps a key that Object.prototype has as an accessor (an assertion library's `should`) or a read-only value", () => {
    Object.defineProperty(Object.prototype, "shouldTl", { get: () => undefined, set: () => {}, configurable: true })
    try {
      const value = roundTrip({ shouldTl: Tensor.ones([2]), constructor: 5 }) as Record<string, any>
      expect(Object.keys(value)).toEqual(["shouldTl", "constructor"])
      expect(Object.getOwnPropertyDescriptor(value, "shouldTl")?.value.shape).toEqual([2])
      expect(value.constructor).toBe(5)
    } finally {
      delete (Object.prototype as Record<string, unknown>).shouldTl
    }
  })

  it("an object of many keys (a state dict, built as a dictionary) comes back the same: its keys in order, odd keys as keys, cycles through it", () => {
    Object.defineProperty(Object.prototype, "shouldTl", { get: () => undefined, set: () => {}, configurable: true })
    try {
      const keys = ["__proto__", ...Array.from({ length: 300 }, (_, i) => `layer${i}.weight`), "constructor", "shouldTl", "7"]
      const dict = JSON.parse(`{${keys.map((k) => `"${k}": 0`).join(",")}}`) as Record<string, unknown>
      keys.forEach((k, i) => (dict[k] = i % 2 === 0 ? Tensor.ones([i % 5]) : i))
      dict.self = dict
      const value = roundTrip(dict) as Record<string, any>
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
      // Integer keys first, then the others in insertion order, as in every object.
      expect(Object.keys(value)).toEqual(["7", ...keys.slice(0, -1), "self"])
      expect(value.self).toBe(value)
      keys.forEach((k, i) => {
        const got = Object.getOwnPropertyDescriptor(value, k)?.value
        if (i % 2 === 0) expect(got.shape).toEqual([i % 5])
        else expect(got).toBe(i)
      })
      expect(({} as Record<string, unknown>)["layer1.weight"]).toBeUndefined()
    } finally {
      delete (Object.prototype as Record<string, unknown>).shouldTl
    }
  })

  it("returns a value that nothing else holds: its tensors die in the first collection after it", async () => {
    // V8's deserializer keeps the objects it made reachable until it is collected itself; tensors
    // written into them survived one collection, so their memory waited for a second one.
    const { skeleton } = encodeValue([1, Tensor.ones([1])])
    // In a function of its own: a suspended async function keeps its registers, the last tensor among them.
    const decodeOnce = (): WeakRef<Tensor> => {
      const t = Tensor.ones([1])
      decodeValue(skeleton, { tensors: [t], ref: (id) => id })
      return new WeakRef(t)
    }
    const alive = Array.from({ length: 4 }, decodeOnce)
    // A WeakRef keeps its target alive until the job that made it ends.
    await nextJob()
    gc()
    expect(alive.filter((w) => w.deref() !== undefined)).toHaveLength(0)
  })
})
