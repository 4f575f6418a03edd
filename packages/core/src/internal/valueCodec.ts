/**
 * Splits a value into a skeleton (everything but tensors, v8-serialized) and its tensors, found depth
 * first in insertion order inside plain objects, arrays, Maps and Sets. ObjectRefs inside the value
 * travel as their ids. Rebuilding puts tensors and refs back where they were.
 */
import * as v8 from "node:v8"
import { ProtocolError } from "../Errors.js"
import { isTensor, type Tensor } from "../Tensor.js"
import { isObjectRef, type ObjectRef } from "../ObjectRef.js"

// Keys no user object plausibly carries; a placeholder is an object with exactly one of them.
const TENSOR_KEY = "\u0000tensorlane:tensor"
const REF_KEY = "\u0000tensorlane:ref"

export interface EncodedValue {
  readonly skeleton: Uint8Array
  readonly tensors: ReadonlyArray<Tensor>
  readonly refs: ReadonlyArray<ObjectRef<unknown>>
}

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** Defined, not assigned: a key named "__proto__" stays a key instead of replacing the prototype. */
const setKey = (target: Record<string, unknown>, key: string, value: unknown): void => {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** What `substitute` answers for an object it leaves alone (undefined is a value a ref may resolve to). */
const KEEP: unique symbol = Symbol("keep")

/**
 * A copy of `root` through arrays, Maps, Sets and plain objects, with every object `substitute`
 * answers for replaced by its answer. Shared parts stay shared and cycles cyclic; other objects
 * (Dates, typed arrays, errors and the like) are kept as they are: they hold no tensors.
 */
const copyStructure = (root: unknown, substitute: (v: object) => unknown): unknown => {
  const copies = new Map<object, unknown>()
  const walk = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") return v
    const replaced = substitute(v)
    if (replaced !== KEEP) return replaced
    if (copies.has(v)) return copies.get(v)
    if (Array.isArray(v)) {
      const out: Array<unknown> = []
      copies.set(v, out)
      for (const item of v) out.push(walk(item))
      return out
    }
    if (v instanceof Map) {
      const out = new Map<unknown, unknown>()
      copies.set(v, out)
      for (const [k, item] of v) out.set(walk(k), walk(item))
      return out
    }
    if (v instanceof Set) {
      const out = new Set<unknown>()
      copies.set(v, out)
      for (const item of v) out.add(walk(item))
      return out
    }
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {}
      copies.set(v, out)
      for (const key of Object.keys(v)) setKey(out, key, walk((v as Record<string, unknown>)[key]))
      return out
    }
    return v
  }
  return walk(root)
}

export const encodeValue = (value: unknown): EncodedValue => {
  const tensors: Array<Tensor> = []
  const refs: Array<ObjectRef<unknown>> = []
  const skeleton = v8.serialize(
    copyStructure(value, (v) => {
      if (isTensor(v)) {
        tensors.push(v)
        return { [TENSOR_KEY]: tensors.length - 1 }
      }
      if (isObjectRef(v)) {
        refs.push(v)
        return { [REF_KEY]: v.id }
      }
      return KEEP
    }),
  )
  return { skeleton, tensors, refs }
}

export interface DecodeHooks {
  readonly tensor: (index: number) => Tensor
  /** What a ref found in the value becomes: a handle, or (for call arguments) the resolved value. */
  readonly ref: (objectId: string) => unknown
}

const placeholder = (v: object): { kind: "tensor"; index: number } | { kind: "ref"; id: string } | undefined => {
  if (!isPlainObject(v)) return undefined
  const keys = Object.keys(v)
  if (keys.length !== 1) return undefined
  const payload = (v as Record<string, unknown>)[keys[0]]
  if (keys[0] === TENSOR_KEY) {
    if (typeof payload !== "number" || !Number.isSafeInteger(payload) || payload < 0) {
      throw new ProtocolError({ message: `tensor placeholder with invalid index ${String(payload)}` })
    }
    return { kind: "tensor", index: payload }
  }
  if (keys[0] === REF_KEY) {
    if (typeof payload !== "string") throw new ProtocolError({ message: "ref placeholder without an object id" })
    return { kind: "ref", id: payload }
  }
  return undefined
}

/**
 * Rebuilds a value around its tensors and refs. The result is a fresh copy of the deserialized
 * skeleton, never the skeleton itself: V8's deserializer keeps every object it made reachable (its
 * back-reference map, a global handle) until the deserializer is collected, so tensors written into
 * those objects would outlive one more garbage collection and their memory could not be recycled.
 */
export const decodeValue = (skeleton: Uint8Array, hooks: DecodeHooks): unknown => {
  let root: unknown
  try {
    root = v8.deserialize(skeleton)
  } catch (cause) {
    throw new ProtocolError({ message: `undecodable value skeleton: ${String(cause)}` })
  }
  return copyStructure(root, (v) => {
    const p = placeholder(v)
    if (p === undefined) return KEEP
    return p.kind === "tensor" ? hooks.tensor(p.index) : hooks.ref(p.id)
  })
}
