/**
 * Errors crossing processes, unit by unit: tensorlane's own keep their class and fields, anything else
 * becomes an ApplicationError that carries the remote name and stack, and whatever cannot travel (a
 * field that is not data, a value that cannot be read) is left out instead of sinking the reply. The
 * size bounds themselves are in Limits.test.ts.
 */
import * as v8 from "node:v8"
import * as Schema from "effect/Schema"
import { describe, expect, it } from "vitest"
import {
  ApplicationError,
  DeviceError,
  ObjectFreedError,
  OutOfMemoryError,
  TimeoutError,
  UnknownTransportError,
} from "../src/Errors.js"
import type { WireError } from "../src/internal/messages.js"
import { ERROR_MESSAGE_CHARS, ERROR_STACK_CHARS, fromWireError, registerErrorClasses, toWireError } from "../src/internal/wireError.js"

const origin = { actor: "Worker-3", method: "step" }

/** Whether a text holds no half of a surrogate pair alone: such a half does not survive UTF-8. */
const wellFormed = (text: string): boolean => Buffer.from(text, "utf8").toString("utf8") === text

/** Through the wire as a process boundary does it: serialized, then rebuilt on the other side. */
const across = (error: unknown): Error => fromWireError(v8.deserialize(v8.serialize(toWireError(error))) as WireError, origin)

describe("tensorlane's errors", () => {
  it.each([
    ["DeviceError with its optional field", new DeviceError({ message: "no cuda here", device: "cuda:1", transport: "gloo" })],
    ["DeviceError without it", new DeviceError({ message: "no cuda here", device: "cuda:1" })],
    ["OutOfMemoryError (numbers)", new OutOfMemoryError({ message: "pool full", requested: 2 ** 40, capacity: 0 })],
    ["UnknownTransportError (an array)", new UnknownTransportError({ message: "no such transport", transport: "x", registered: ["gloo", "nixl"] })],
    ["ObjectFreedError", new ObjectFreedError({ message: "gone", objectId: "Worker-0.7" })],
  ])("%s keeps its class, its fields, its message and its stack", (_, error) => {
    const back = across(error)
    expect(back).toBeInstanceOf(error.constructor)
    expect(back).toEqual(error)
    expect({ ...back }).toEqual({ ...error })
    expect(back.message).toBe(error.message)
    expect(back.stack).toBe(error.stack)
  })

  it("the wire names the tag and carries the fields beside the message and the stack, not in them", () => {
    const error = new TimeoutError({ message: "too slow", timeoutMs: 250 })
    expect(toWireError(error)).toEqual({
      tag: "TimeoutError",
      name: "TimeoutError",
      message: "too slow",
      stack: error.stack,
      fields: { timeoutMs: 250 },
    })
  })

  it("a wire error whose fields do not fit its class becomes an ApplicationError, not a malformed instance", () => {
    const forged = Object.assign(new Error("late"), { _tag: "TimeoutError", timeoutMs: "soon" })
    const back = across(forged)
    expect(back).toBeInstanceOf(ApplicationError)
    expect(back).toMatchObject({ remoteName: "Error", actor: "Worker-3", method: "step", message: "Worker-3.step threw Error: late" })
  })

  it("a tag this process does not know becomes an ApplicationError; registering the class keeps it", () => {
    class PeerLostError extends Schema.TaggedError<PeerLostError>()("Test21PeerLostError", { message: Schema.String, peer: Schema.Number }) {}
    const error = new PeerLostError({ message: "rank 2 left", peer: 2 })
    expect(toWireError(error).tag).toBe("")
    const unknown = across(error)
    expect(unknown).toBeInstanceOf(ApplicationError)
    expect(unknown).toMatchObject({ remoteName: "Test21PeerLostError", remoteStack: error.stack })
    // A peer naming a tag that nobody registered, as a hostile one might.
    const named = fromWireError({ ...toWireError(error), tag: "Test21PeerLostError" }, origin)
    expect(named).toBeInstanceOf(ApplicationError)
    registerErrorClasses(PeerLostError)
    const known = across(error)
    expect(known).toBeInstanceOf(PeerLostError)
    expect(known).toMatchObject({ peer: 2, message: "rank 2 left" })
  })
})

describe("anything else", () => {
  it("an Error becomes an ApplicationError naming the actor, the method and the remote class, with the remote stack", () => {
    class ConfigError extends Error {
      override name = "ConfigError"
    }
    const error = new ConfigError("missing lr")
    const back = across(error)
    expect(back).toBeInstanceOf(ApplicationError)
    expect(back).toMatchObject({
      _tag: "ApplicationError",
      message: "Worker-3.step threw ConfigError: missing lr",
      remoteName: "ConfigError",
      remoteStack: error.stack,
      actor: "Worker-3",
      method: "step",
    })
    expect((back as ApplicationError).remoteStack).toMatch(/^ConfigError: missing lr\n\s+at .*WireError\.test\.ts/)
  })

  it.each([
    ["a string", "plain words", "plain words"],
    ["a number", 42, "42"],
    ["undefined", undefined, "undefined"],
    ["a plain object", { code: 7 }, "[object Object]"],
  ])("a thrown %s travels as its text", (_, value, textOf) => {
    expect(toWireError(value)).toEqual({ tag: "", name: "Error", message: textOf, stack: textOf, fields: {} })
    expect(across(value)).toMatchObject({ message: `Worker-3.step threw Error: ${textOf}`, remoteName: "Error", remoteStack: textOf })
  })

  it("an error without a stack gets one of its name and message", () => {
    const error = new TypeError("no frames")
    error.stack = undefined
    expect(toWireError(error).stack).toBe("TypeError: no frames")
  })
})

describe("what cannot travel", () => {
  it("fields that are not data are left out, and the others kept: the reply is not sunk", () => {
    const cyclic: Array<unknown> = [1]
    cyclic.push(cyclic)
    const error = Object.assign(new Error("odd fields"), {
      callback: () => 1,
      symbol: Symbol("s"),
      big: 10n,
      nested: { deep: true },
      withFunction: ["a", () => 2],
      cyclic,
      count: 3,
      ok: true,
      none: null,
      list: ["x", 1, false],
    })
    const wire = toWireError(error)
    expect(wire.fields).toEqual({ cyclic, count: 3, ok: true, none: null, list: ["x", 1, false] })
    expect(() => v8.serialize(wire)).not.toThrow()
    expect(across(error)).toBeInstanceOf(ApplicationError)
  })

  it("a field whose getter throws is left out, and the error still travels", () => {
    const error = new RangeError("bad getter")
    Object.defineProperty(error, "lazy", {
      enumerable: true,
      get() {
        throw new Error("not now")
      },
    })
    Object.assign(error, { kept: 1 })
    const wire = toWireError(error)
    expect(wire).toMatchObject({ name: "RangeError", message: "bad getter", fields: { kept: 1 } })
    expect(wire.fields).not.toHaveProperty("lazy")
  })

  it("an error whose tag, name, message or stack throws when read, or a value with no text, still travels as an ApplicationError", () => {
    const unreadable = new Error("hidden")
    for (const key of ["stack", "name", "message", "_tag"]) {
      Object.defineProperty(unreadable, key, {
        get() {
          throw new Error(`no ${key}`)
        },
      })
    }
    const refuse = () => {
      throw new Error("trap")
    }
    const thrownValues = [
      unreadable,
      Object.create(null),
      {
        toString() {
          throw new Error("no text")
        },
      },
      new Proxy(new Error("keys"), { ownKeys: refuse }),
      new Proxy({}, { getPrototypeOf: refuse, get: refuse }),
    ]
    for (const value of thrownValues) {
      const wire = toWireError(value)
      expect(() => v8.serialize(wire)).not.toThrow()
      const back = fromWireError(wire, origin)
      expect(back).toBeInstanceOf(ApplicationError)
      expect(back.message).toMatch(/^Worker-3\.step threw /)
    }
  })
})

describe("cuts", () => {
  it("a name over its bound is cut like a message", () => {
    const error = new Error("short")
    error.name = "N".repeat(ERROR_MESSAGE_CHARS * 2)
    const wire = toWireError(error)
    expect(wire.name.length).toBeLessThanOrEqual(ERROR_MESSAGE_CHARS)
    expect(wire.name).toMatch(/^N+\.\.\. \(\d+ more characters\)$/)
    expect(wire.message).toBe("short")
  })

  it("a stack that does not repeat the message is cut to its own bound, keeping its start", () => {
    const error = new Error("m")
    error.stack = `custom trace\n${"    at frame\n".repeat(ERROR_STACK_CHARS)}`
    const wire = toWireError(error)
    expect(wire.stack.length).toBeLessThanOrEqual(ERROR_STACK_CHARS)
    expect(wire.stack.startsWith("custom trace\n    at frame\n")).toBe(true)
    expect(wire.stack).toMatch(/\.\.\. \(\d+ more characters\)$/)
  })

  it("never cuts between the two halves of a character outside the BMP", () => {
    // One of the two alignments puts a high surrogate right at the cut.
    for (const prefix of ["", "x"]) {
      const wire = toWireError(new Error(prefix + "😀".repeat(ERROR_MESSAGE_CHARS)))
      const kept = wire.message.slice(0, wire.message.indexOf("..."))
      expect(kept.length).toBeLessThan(ERROR_MESSAGE_CHARS)
      expect(wellFormed(kept)).toBe(true)
      expect(wellFormed(wire.stack)).toBe(true)
    }
  })

  it("cuts each string of an array field, and leaves its other items as they are", () => {
    const long = "s".repeat(ERROR_STACK_CHARS + 10)
    const error = Object.assign(new Error("paths"), { tried: [long, 5, "short"] })
    const [first, second, third] = toWireError(error).fields.tried as Array<unknown>
    expect((first as string).length).toBeLessThanOrEqual(ERROR_STACK_CHARS)
    expect(first).toMatch(/^s+\.\.\. \(\d+ more characters\)$/)
    expect([second, third]).toEqual([5, "short"])
  })
})
