/** Errors crossing process boundaries: tensorlane's own keep their class, anything else becomes data. */
import * as v8 from "node:v8"
import * as Errors from "../Errors.js"
import type { WireError } from "./messages.js"

type ErrorClass = (new (fields: any) => Error) & { readonly identifier: string }

const known: Record<string, ErrorClass> = {}
for (const value of Object.values(Errors)) {
  if (typeof value === "function" && typeof (value as Partial<ErrorClass>).identifier === "string") {
    known[(value as ErrorClass).identifier] = value as ErrorClass
  }
}

/**
 * For packages with typed errors of their own (a transport's): registered in every process that
 * imports the package, they keep their class across processes like core's own.
 */
export const registerErrorClasses = (...classes: ReadonlyArray<ErrorClass>): void => {
  for (const c of classes) known[c.identifier] = c
}

/**
 * Bounds of what an error takes across processes, in characters: its name, message and each string
 * field (a field may be a stack), and its stack; fields that do not fit in FIELDS_BYTES together are
 * left out. A huge error then travels like any other.
 */
export const ERROR_MESSAGE_CHARS = 16 * 1024
export const ERROR_STACK_CHARS = 64 * 1024
const FIELDS_BYTES = 256 * 1024
/** Room for the note that says what was cut: a text cut once is within its bound, and stays as it is. */
const NOTE_CHARS = 40

/** `text` within `max` characters, its cut marked with how much is missing. */
const cut = (text: string, max: number): string => {
  if (text.length <= max) return text
  let keep = max - NOTE_CHARS
  // Not between the two halves of a surrogate pair.
  if (/[\uD800-\uDBFF]/.test(text[keep - 1] ?? "")) keep--
  return `${text.slice(0, keep)}... (${text.length - keep} more characters)`
}

/** What stands in for a message, a name or a text that throws when read. */
const UNREADABLE = "(a value that cannot be read)"

/**
 * `read()`, or `fallback` when it throws: a thrown value is its thrower's, getters and `toString`
 * included, and it must not keep its call from being answered.
 */
const readable = <A>(read: () => A, fallback: A): A => {
  try {
    return read()
  } catch {
    return fallback
  }
}

/** A field's value with its strings cut, or undefined when it is not data (a function must not sink the reply). */
const fieldValue = (value: unknown): unknown => {
  if (typeof value === "string") return cut(value, ERROR_STACK_CHARS)
  if (value === null || typeof value === "number" || typeof value === "boolean") return value
  if (Array.isArray(value)) return value.map((item) => (typeof item === "string" ? cut(item, ERROR_STACK_CHARS) : item))
  return undefined
}

/** The error's own fields that survive serialization, within FIELDS_BYTES together. */
const ownFields = (error: object): Record<string, unknown> => {
  const fields: Record<string, unknown> = {}
  let bytes = 0
  for (const key of readable(() => Object.keys(error), [])) {
    // The message and the stack travel beside the fields.
    if (key === "_tag" || key === "stack" || key === "message") continue
    const value = fieldValue(readable(() => (error as Record<string, unknown>)[key], undefined))
    if (value === undefined) continue
    let size: number
    try {
      size = v8.serialize(value).byteLength + key.length
    } catch {
      // Not data: left out.
      continue
    }
    if (bytes + size > FIELDS_BYTES) continue
    bytes += size
    fields[key] = value
  }
  return fields
}

/**
 * The stack within its bound. V8's stack repeats the message: that copy is cut like the message, so
 * that the frames after it survive.
 */
const cutStack = (stack: string, message: string, cutMessage: string): string => {
  const at = cutMessage === message ? -1 : stack.indexOf(message)
  const shortened = at < 0 ? stack : stack.slice(0, at) + cutMessage + stack.slice(at + message.length)
  return cut(shortened, ERROR_STACK_CHARS)
}

export const toWireError = (error: unknown): WireError => {
  if (readable(() => error instanceof Error, false)) {
    const tag = readable(() => (error as { _tag?: unknown })._tag, undefined)
    const name = cut(readable(() => String((error as Error).name), "Error"), ERROR_MESSAGE_CHARS)
    const full = readable(() => String((error as Error).message), UNREADABLE)
    const message = cut(full, ERROR_MESSAGE_CHARS)
    const stack = readable(() => (error as Error).stack, undefined)
    return {
      tag: typeof tag === "string" && tag in known ? tag : "",
      name,
      message,
      stack: typeof stack === "string" ? cutStack(stack, full, message) : `${name}: ${message}`,
      fields: ownFields(error as Error),
    }
  }
  const text = cut(readable(() => String(error), UNREADABLE), ERROR_MESSAGE_CHARS)
  return { tag: "", name: "Error", message: text, stack: text, fields: {} }
}

/** Rebuilds a tensorlane error as its class; anything else is an ApplicationError of `actor.method`. */
export const fromWireError = (wire: WireError, origin: { actor: string; method: string }): Error => {
  const Known = wire.tag !== "" ? known[wire.tag] : undefined
  if (Known !== undefined) {
    try {
      const error = new Known({ ...wire.fields, message: wire.message })
      // Keep the remote stack, the one that says where things went wrong.
      error.stack = wire.stack
      return error
    } catch {
      // Fields that do not fit the class: report it as what it is, a remote failure.
    }
  }
  return new Errors.ApplicationError({
    message: `${origin.actor}.${origin.method} threw ${wire.name}: ${wire.message}`,
    remoteName: wire.name,
    remoteStack: wire.stack,
    actor: origin.actor,
    method: origin.method,
  })
}
