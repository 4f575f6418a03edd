/**
 * Splits a value into a skeleton (everything but tensors, v8-serialized) and its tensors, found depth
 * first in insertion order inside plain objects, arrays, Maps and Sets. ObjectRefs inside the value
 * travel as their ids. Rebuilding puts tensors and refs back where they were: the skeleton holds a
 * tensor placeholder wherever a tensor was, the same object at each (V8's serializer writes it once,
 * then a reference to it) but in a Set or as a Map's key (where it would stand for one), and
 * rebuilding walks the skeleton in the same order, so that the nth placeholder it meets is the nth
 * tensor.
 */
import { types } from "node:util"
import * as v8 from "node:v8"
import { InvalidArgumentError, ProtocolError } from "../Errors.js"
import { MAX_VALUE_BYTES } from "./frame.js"
import { isTensor, type Tensor } from "../Tensor.js"
import { isObjectRef, type ObjectRef } from "../ObjectRef.js"

// Keys no user object plausibly carries; a placeholder is an object with exactly one of them.
const TENSOR_KEY = "\u0000tensorlane:tensor"
const REF_KEY = "\u0000tensorlane:ref"
const TENSOR_PLACEHOLDER = Object.freeze({ [TENSOR_KEY]: true })

export interface EncodedValue {
  readonly skeleton: Uint8Array
  readonly tensors: ReadonlyArray<Tensor>
  readonly refs: ReadonlyArray<ObjectRef<unknown>>
}

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * A key that Object.prototype has ("__proto__", "constructor", a library's accessor) is defined, not
 * assigned: it stays a key of its own instead of replacing the prototype, calling a setter, or
 * failing on a frozen prototype. Every other key is assigned (defineProperty costs about a µs a key).
 */
const setKey = (target: Record<string, unknown>, key: string, value: unknown): void => {
  if (key in target) Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
  else target[key] = value
}

/** Keys past which a copied plain object is built as a dictionary (see copyStructure). */
const DICTIONARY_KEYS = 128

/** What `substitute` answers for an object it leaves alone (undefined is a value a ref may resolve to). */
const KEEP: unique symbol = Symbol("keep")

/** How deep arrays, Maps, Sets and plain objects may nest in a value (V8's serializer runs out of stack far deeper). */
export const MAX_VALUE_DEPTH = 1000

/**
 * Objects that travel as they are (V8's serializer keeps them): they hold no tensors. Told by their
 * brand, as V8 tells them: an object that merely inherits from Date.prototype is no Date to V8, which
 * writes it as a plain object that the decoder would walk.
 */
const travelsAsIs = (v: object): boolean =>
  types.isDate(v) ||
  types.isRegExp(v) ||
  types.isNativeError(v) ||
  types.isArrayBuffer(v) ||
  ArrayBuffer.isView(v) ||
  types.isBooleanObject(v) ||
  types.isNumberObject(v) ||
  types.isStringObject(v) ||
  types.isBigIntObject(v)

/** What a value that cannot travel is, for the error that refuses it. */
const untravelable = (v: unknown): string | undefined => {
  if (typeof v === "function") return "a function"
  if (typeof v === "symbol") return "a symbol"
  if (v === null || typeof v !== "object" || travelsAsIs(v)) return undefined
  if (v instanceof SharedArrayBuffer) return "a SharedArrayBuffer (wrap its memory in a Tensor)"
  if (v instanceof Promise) return "a Promise (await it first)"
  if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef) return `a ${v.constructor.name}`
  const name = (v as { constructor?: { name?: unknown } }).constructor?.name
  return `an instance of ${typeof name === "string" && name !== "" ? name : "a class"} (it would arrive as a plain object without its prototype: pass a plain object)`
}

/** `root.a[0]` style path of the keys walked so far, for error messages. */
const pathOf = (root: string, keys: ReadonlyArray<string | number>): string =>
  keys.reduce<string>((path, key) => (typeof key === "number" ? `${path}[${key}]` : `${path}.${key}`), root)

/**
 * A copy of `root` through arrays, Maps, Sets and plain objects, with every object `substitute`
 * answers for replaced by its answer (`key`: the object is a Set's member or a Map's key, where the
 * answer must be an object of its own). Shared parts stay shared and cycles cyclic; other objects
 * (Dates, typed arrays, errors and the like) are kept as they are: they hold no tensors. `refuse`
 * says why a value cannot be copied (deeper than MAX_VALUE_DEPTH, arrays of more than
 * `maxArrayElements` elements together, or not something that travels). Children are walked in the
 * order the copy lists them, which is the order a walk of the copy meets them in: Maps and Sets as
 * they were when the walk reached them (a getter walked meanwhile may change them), a Proxy's keys
 * as an ordinary object orders them.
 */
const copyStructure = (
  root: unknown,
  substitute: (v: object, key: boolean) => unknown,
  refuse: (why: string, path: () => string) => never,
  checkLeaves: boolean,
  maxArrayElements: number,
): unknown => {
  const copies = new Map<object, unknown>()
  let elementsLeft = maxArrayElements
  const keys: Array<string | number> = []
  const walk = (v: unknown, key: boolean): unknown => {
    if (checkLeaves && (typeof v === "function" || typeof v === "symbol")) refuse(untravelable(v)!, () => pathOf("value", keys))
    if (v === null || typeof v !== "object") return v
    // Tensors and refs are never among the copies: a shared object is looked at once.
    if (copies.has(v)) return copies.get(v)
    const replaced = substitute(v, key)
    if (replaced !== KEEP) return replaced
    if (keys.length >= MAX_VALUE_DEPTH) refuse(`nested deeper than ${MAX_VALUE_DEPTH} levels`, () => pathOf("value", keys.slice(0, 5)) + "...")
    const item = (name: string | number, child: unknown, key = false): unknown => {
      if (child === null || (typeof child !== "object" && typeof child !== "function" && typeof child !== "symbol")) return child
      keys.push(name)
      const copy = walk(child, key)
      keys.pop()
      return copy
    }
    if (Array.isArray(v)) {
      if (!(v.length <= elementsLeft)) refuse(`an array of ${v.length} elements, past the ${maxArrayElements} that a value's arrays may hold together`, () => pathOf("value", keys))
      elementsLeft -= v.length
      const out: Array<unknown> = []
      copies.set(v, out)
      for (let i = 0; i < v.length; i++) out.push(item(i, v[i]))
      return out
    }
    if (types.isMap(v)) {
      const out = new Map<unknown, unknown>()
      copies.set(v, out)
      for (const [k, child] of Array.from(Map.prototype.entries.call(v))) out.set(item("<key>", k, true), item(typeof k === "string" || typeof k === "number" ? `get(${JSON.stringify(k)})` : "<value>", child))
      return out
    }
    if (types.isSet(v)) {
      const out = new Set<unknown>()
      copies.set(v, out)
      for (const child of Array.from(Set.prototype.values.call(v))) out.add(item("<item>", child, true))
      return out
    }
    if (isPlainObject(v)) {
      const own = types.isProxy(v) ? Object.keys(Object.fromEntries(Object.keys(v).map((k) => [k, 0]))) : Object.keys(v)
      // Such an object would be read back as a placeholder: a tensor or a ref in its place.
      if (checkLeaves && (own.includes(TENSOR_KEY) || own.includes(REF_KEY))) refuse("an object holding a key that tensorlane keeps for its own placeholders", () => pathOf("value", keys))
      // V8 keeps the properties of an object of this many keys in a dictionary however it is built;
      // one without a prototype starts as a dictionary, and fills about six times faster.
      const large = own.length > DICTIONARY_KEYS
      const out: Record<string, unknown> = large ? Object.create(null) : {}
      copies.set(v, out)
      for (const key of own) setKey(out, key, item(key, (v as Record<string, unknown>)[key]))
      if (large) Object.setPrototypeOf(out, Object.prototype)
      return out
    }
    if (checkLeaves) {
      const why = untravelable(v)
      if (why !== undefined) refuse(why, () => pathOf("value", keys))
    }
    return v
  }
  return walk(root, false)
}

/**
 * Splits a value for travel. Refuses (InvalidArgumentError, naming where in the value) what cannot
 * travel faithfully: functions, symbols, promises, weak collections, SharedArrayBuffers, class
 * instances, and nesting deeper than MAX_VALUE_DEPTH. `what` names the value ("argument", "result").
 */
export const encodeValue = (value: unknown, what = "value"): EncodedValue => {
  const tensors: Array<Tensor> = []
  const refs: Array<ObjectRef<unknown>> = []
  const copy = copyStructure(
    value,
    (v, key) => {
      if (isTensor(v)) {
        tensors.push(v)
        return key ? { ...TENSOR_PLACEHOLDER } : TENSOR_PLACEHOLDER
      }
      if (isObjectRef(v)) {
        refs.push(v)
        return { [REF_KEY]: v.id }
      }
      return KEEP
    },
    (why, path) => {
      throw new InvalidArgumentError({ message: `${path().replace(/^value/, what)} cannot travel to another process: it is ${why}`, argument: what })
    },
    true,
    // Each element takes a byte or more of the skeleton.
    MAX_VALUE_BYTES,
  )
  try {
    return { skeleton: v8.serialize(copy), tensors, refs }
  } catch (cause) {
    const said = cause instanceof Error ? cause.message : String(cause)
    // The walk above refuses what V8 cannot copy, but inside the objects it leaves to V8.
    const where = said.endsWith("could not be cloned.") ? "an object V8 copies as it is (an Error, a Date, a typed array) holds what V8 cannot copy: " : ""
    throw new InvalidArgumentError({ message: `${what} cannot travel to another process: ${where}${said}`, argument: what })
  }
}

export interface DecodeHooks {
  /** The value's tensors, in the order its skeleton's placeholders stand for them: one each. */
  readonly tensors: ReadonlyArray<Tensor>
  /** What a ref found in the value becomes: a handle, or (for call arguments) the resolved value. */
  readonly ref: (objectId: string) => unknown
}

const placeholder = (v: object): { kind: "tensor" } | { kind: "ref"; id: string } | undefined => {
  if (!isPlainObject(v)) return undefined
  const keys = Object.keys(v)
  if (keys.length !== 1) return undefined
  const payload = (v as Record<string, unknown>)[keys[0]]
  if (keys[0] === TENSOR_KEY) {
    if (payload !== true) throw new ProtocolError({ message: `tensor placeholder holding ${String(payload)}` })
    return { kind: "tensor" }
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
  const { tensors } = hooks
  let met = 0
  const next = (): Tensor => {
    const tensor = tensors[met++]
    if (tensor === undefined) throw new ProtocolError({ message: `a value skeleton holds more tensor placeholders than the ${tensors.length} tensors of its value` })
    return tensor
  }
  // The placeholder a skeleton of ours holds, once met: the same object at every tensor.
  let seen: object | undefined
  const value = copyStructure(
    root,
    (v) => {
      if (v === seen) return next()
      const p = placeholder(v)
      if (p === undefined) return KEEP
      if (p.kind === "ref") return hooks.ref(p.id)
      seen = v
      return next()
    },
    (why) => {
      throw new ProtocolError({ message: `a value skeleton is refused: ${why}` })
    },
    false,
    // Our skeletons hold dense arrays, a byte or more an element; a peer's sparse ones would be made dense here.
    skeleton.byteLength,
  )
  if (met !== tensors.length) throw new ProtocolError({ message: `a value skeleton holds ${met} tensor placeholders for the ${tensors.length} tensors of its value` })
  return value
}
