/**
 * Expecting an error, one way for every test in the repository: these return what a call threw or
 * rejected with, for `expect` to check, and fail the test when the call succeeds instead.
 */
import { inspect } from "node:util"

const succeeded = (value: unknown): Error => new Error(`expected the call to fail, but it gave ${inspect(value, { depth: 2 })}`)

/** The error `call` throws (a call refused at once); fails when it returns. */
export const thrown = (call: () => unknown): unknown => {
  let value: unknown
  try {
    value = call()
  } catch (error) {
    return error
  }
  throw succeeded(value)
}

/**
 * The error a promise rejects with; given a function, also what it throws before it returns a
 * promise (a call refused at submission or failing later alike). Fails when it resolves.
 */
export const rejection = async (call: PromiseLike<unknown> | (() => unknown)): Promise<unknown> => {
  let value: unknown
  try {
    value = await (typeof call === "function" ? call() : call)
  } catch (error) {
    return error
  }
  throw succeeded(value)
}

/** The `_tag` of a tensorlane error; undefined for anything else. */
export const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string" ? (error as { _tag: string })._tag : undefined
