/** The shared helpers for expecting an error: they give the error, and fail when the call succeeds. */
import { describe, expect, it } from "vitest"
import { DTypeError } from "../src/Errors.js"
import { rejection, tagOf, thrown } from "./helpers/errors.ts"

describe("thrown", () => {
  it("gives what the call threw, and fails, naming the value, when it returns", () => {
    const error = new RangeError("no")
    const refuse = () => {
      throw error
    }
    expect(thrown(refuse)).toBe(error)
    expect(() => thrown(() => ({ answer: 42 }))).toThrow("expected the call to fail, but it gave { answer: 42 }")
  })
})

describe("rejection", () => {
  it("gives what a promise rejects with, and fails when it resolves", async () => {
    const error = new RangeError("later")
    expect(await rejection(Promise.reject(error))).toBe(error)
    await expect(rejection(Promise.resolve("fine"))).rejects.toThrow("expected the call to fail, but it gave 'fine'")
  })

  it("given a function, also gives what it throws before returning a promise", async () => {
    const error = new RangeError("at once")
    const refuse = () => {
      throw error
    }
    expect(await rejection(refuse)).toBe(error)
    expect(await rejection(() => Promise.reject(error))).toBe(error)
    await expect(rejection(async () => 1)).rejects.toThrow("expected the call to fail, but it gave 1")
  })
})

describe("tagOf", () => {
  it("names a tagged error's tag, and nothing for anything else", () => {
    expect(tagOf(new DTypeError({ message: "x" }))).toBe("DTypeError")
    for (const other of [new Error("x"), { _tag: 4 }, "DTypeError", null, undefined]) expect(tagOf(other)).toBeUndefined()
  })
})
