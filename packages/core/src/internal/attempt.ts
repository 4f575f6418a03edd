/**
 * The one bridge from the Promise face to the Effect face, used by every package: typed errors are
 * failures, anything else (a bug) a defect.
 */
import * as Effect from "effect/Effect"
import type { TaggedError } from "../Errors.js"

const isTaggedError = (error: unknown): error is TaggedError =>
  error instanceof Error && typeof (error as { _tag?: unknown })._tag === "string"

/**
 * `run` (a Promise or a plain value; what it throws counts too) as an Effect, synchronous when `run`
 * is. `E` is what `run` can raise, derived by the caller from the code it wraps (usually inferred
 * from the operation's declared type): the types cannot check it, the faces' tests check a few.
 */
export const attempt = <A, E extends TaggedError>(run: () => A | PromiseLike<A>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    let result: A | PromiseLike<A>
    try {
      result = run()
    } catch (error) {
      return failure<E>(error)
    }
    if (!isPromiseLike(result)) return Effect.succeed(result)
    const pending = result
    return Effect.tryPromise({ try: () => Promise.resolve(pending), catch: (error) => error }).pipe(Effect.catch(failure<E>))
  })

const failure = <E extends TaggedError>(error: unknown): Effect.Effect<never, E> =>
  isTaggedError(error) ? Effect.fail(error as E) : Effect.die(error)

const isPromiseLike = <A>(value: A | PromiseLike<A>): value is PromiseLike<A> =>
  typeof value === "object" && value !== null && typeof (value as PromiseLike<A>).then === "function"
