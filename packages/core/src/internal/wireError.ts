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

/** The error's own fields that survive serialization: a field holding a function must not sink the reply. */
const ownFields = (error: object): Record<string, unknown> => {
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    if (key === "_tag" || key === "stack") continue
    if (value !== null && !["string", "number", "boolean"].includes(typeof value) && !Array.isArray(value)) continue
    try {
      v8.serialize(value)
      fields[key] = value
    } catch {
      // Not data: left out.
    }
  }
  return fields
}

export const toWireError = (error: unknown): WireError => {
  if (error instanceof Error) {
    const tag = (error as { _tag?: unknown })._tag
    return {
      tag: typeof tag === "string" && tag in known ? tag : "",
      name: error.name,
      message: error.message,
      stack: error.stack ?? `${error.name}: ${error.message}`,
      fields: ownFields(error),
    }
  }
  return { tag: "", name: "Error", message: String(error), stack: String(error), fields: {} }
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
