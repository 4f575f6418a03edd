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

export const encodeValue = (value: unknown): EncodedValue => {
  const tensors: Array<Tensor> = []
  const refs: Array<ObjectRef<unknown>> = []
  const seen = new Map<object, unknown>()
  const walk = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") return v
    if (isTensor(v)) {
      tensors.push(v)
      return { [TENSOR_KEY]: tensors.length - 1 }
    }
    if (isObjectRef(v)) {
      refs.push(v)
      return { [REF_KEY]: v.id }
    }
    const known = seen.get(v)
    if (known !== undefined) return known
    if (Array.isArray(v)) {
      const out: Array<unknown> = []
      seen.set(v, out)
      for (const item of v) out.push(walk(item))
      return out
    }
    if (v instanceof Map) {
      const out = new Map()
      seen.set(v, out)
      for (const [k, item] of v) {
        const key = walk(k)
        out.set(key, walk(item))
      }
      return out
    }
    if (v instanceof Set) {
      const out = new Set()
      seen.set(v, out)
      for (const item of v) out.add(walk(item))
      return out
    }
    if (isPlainObject(v)) {
      const out: Record<string, unknown> = {}
      seen.set(v, out)
      for (const key of Object.keys(v)) out[key] = walk((v as Record<string, unknown>)[key])
      return out
    }
    // Dates, typed arrays, errors and the like: structured clone handles them as they are.
    return v
  }
  const skeleton = v8.serialize(walk(value))
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

export const decodeValue = (skeleton: Uint8Array, hooks: DecodeHooks): unknown => {
  let root: unknown
  try {
    root = v8.deserialize(skeleton)
  } catch (cause) {
    throw new ProtocolError({ message: `undecodable value skeleton: ${String(cause)}` })
  }
  const seen = new Set<object>()
  const walk = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") return v
    const p = placeholder(v)
    if (p !== undefined) return p.kind === "tensor" ? hooks.tensor(p.index) : hooks.ref(p.id)
    if (seen.has(v)) return v
    seen.add(v)
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = walk(v[i])
    } else if (v instanceof Map) {
      const entries = [...v.entries()]
      v.clear()
      for (const [k, item] of entries) v.set(walk(k), walk(item))
    } else if (v instanceof Set) {
      const items = [...v]
      v.clear()
      for (const item of items) v.add(walk(item))
    } else if (isPlainObject(v)) {
      const o = v as Record<string, unknown>
      for (const key of Object.keys(o)) o[key] = walk(o[key])
    }
    return v
  }
  return walk(root)
}
