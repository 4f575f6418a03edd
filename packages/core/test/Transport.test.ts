/**
 * The transport contract in Effect: a transport written with Promises keeps its functions and gains
 * its contract (hooks as Effects, typed errors failures and anything else defects, the registration
 * scoped), and the runtime calls its functions as they are; one written in Effect runs each hook to a
 * Promise, interrupted when its transfer aborts, its registrations' scopes kept until released.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { describe, expect, expectTypeOf, it } from "vitest"
import { InvalidArgumentError, ProtocolError, TransferError } from "../src/Errors.js"
import { promiseFace } from "../src/internal/transportRegistry.js"
import { Tensor } from "../src/Tensor.js"
import {
  type FetchRequest,
  type RegistrationFailure,
  type TransferFailure,
  type TransportCapabilities,
  type TransportObject,
  defineEffectTransport,
  defineTransport,
  isTensorTransport,
} from "../src/Transport.js"
import { rejection, thrown } from "./helpers/errors.ts"

const oneSided: TransportCapabilities = { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true }
const object: TransportObject = { objectId: "p.1", tensors: [Tensor.ones([4])] }
const request = (signal: AbortSignal = new AbortController().signal): FetchRequest => ({
  objectId: "p.1",
  producer: "p",
  producerAddress: "",
  consumer: "c",
  tensors: [],
  metadata: undefined,
  into: [],
  signal,
})

describe("defineTransport: a transport written with Promises", () => {
  it("stays callable as written, with its contract beside it, and the runtime calls its own functions", async () => {
    const calls: Array<string> = []
    const t = defineTransport({
      name: "p",
      capabilities: oneSided,
      fetch: async (_request: FetchRequest) => void calls.push("fetch"),
    })
    await t.fetch(request())
    expect(isTensorTransport(t.effect)).toBe(true)
    expect(t.effect.promise).toBe(t)
    // No wrapping, so no fiber per transfer.
    expect(promiseFace(t.effect)).toBe(t)
    expect(defineTransport(t)).toBe(t)
    await Effect.runPromise(t.effect.fetch!(request()))
    expect(calls).toEqual(["fetch", "fetch"])
  })

  it("fails its hooks' Effects with their typed errors, and dies of anything else", async () => {
    const refused = new ProtocolError({ message: "malformed" })
    let thrownValue: unknown = refused
    const t = defineTransport({ name: "p", capabilities: oneSided, fetch: async () => Promise.reject(thrownValue) })
    const failed = await Effect.runPromiseExit(t.effect.fetch!(request()))
    expect(failed).toEqual(Exit.fail(refused))
    thrownValue = new RangeError("a bug")
    const died = await Effect.runPromiseExit(t.effect.fetch!(request()))
    expect(Exit.isFailure(died) && Cause.hasDies(died.cause)).toBe(true)
    expectTypeOf(t.effect.fetch!).returns.toEqualTypeOf<Effect.Effect<void, TransferFailure>>()
  })

  it("makes extractMetadata and release one scoped registration", async () => {
    const events: Array<string> = []
    const t = defineTransport({
      name: "p",
      capabilities: oneSided,
      fetch: async () => undefined,
      extractMetadata: ({ objectId }) => {
        events.push(`register ${objectId}`)
        return { at: objectId }
      },
      release: async ({ objectId }) => void events.push(`release ${objectId}`),
    })
    expectTypeOf(t.effect.register!).returns.toEqualTypeOf<Effect.Effect<unknown, RegistrationFailure, Scope.Scope>>()
    const metadata = await Effect.runPromise(Effect.scoped(Effect.tap(t.effect.register!(object), () => Effect.sync(() => events.push("in scope")))))
    expect(metadata).toEqual({ at: "p.1" })
    expect(events).toEqual(["register p.1", "in scope", "release p.1"])
  })

  it("gives prepare an Effect that cannot fail, whatever the function throws or rejects with", async () => {
    const outcomes: Array<() => void | Promise<void>> = [
      () => undefined,
      () => {
        throw new ProtocolError({ message: "no library" })
      },
      () => Promise.reject(new RangeError("a bug")),
    ]
    for (const outcome of outcomes) {
      const t = defineTransport({ name: "p", capabilities: oneSided, fetch: async () => undefined, prepare: outcome })
      expect(Exit.isSuccess(await Effect.runPromiseExit(t.effect.prepare!))).toBe(true)
    }
  })

  it("refuses hooks that its capabilities need and it lacks, at definition", () => {
    expect(thrown(() => defineTransport({ name: "p", capabilities: oneSided }))).toBeInstanceOf(InvalidArgumentError)
    expect(thrown(() => defineEffectTransport({ name: "Upper", capabilities: oneSided, fetch: () => Effect.void }))).toBeInstanceOf(InvalidArgumentError)
  })
})

describe("a transport written in Effect, as the runtime runs it", () => {
  it("resolves and rejects as its Effect ends: a failure with the error itself, a defect with what was thrown", async () => {
    const failure = new TransferError({ message: "peer gone", transport: "e" })
    const bug = new RangeError("a bug")
    let outcome: Effect.Effect<void, TransferFailure> = Effect.void
    const face = promiseFace(defineEffectTransport({ name: "e", capabilities: oneSided, fetch: () => outcome }))
    await face.fetch!(request())
    outcome = Effect.fail(failure)
    expect(await rejection(face.fetch!(request()))).toBe(failure)
    outcome = Effect.die(bug)
    expect(await rejection(face.fetch!(request()))).toBe(bug)
  })

  it("runs prepare to a Promise", async () => {
    let prepared = 0
    const face = promiseFace(defineEffectTransport({ name: "e", capabilities: oneSided, fetch: () => Effect.void, prepare: Effect.sync(() => void prepared++) }))
    await face.prepare!()
    expect(prepared).toBe(1)
  })

  it("interrupts a hook when its request's signal aborts, running its finalizers", async () => {
    const events: Array<string> = []
    const face = promiseFace(
      defineEffectTransport({
        name: "e",
        capabilities: oneSided,
        fetch: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => events.push("interrupted")))),
      }),
    )
    const controller = new AbortController()
    const fetching = rejection(face.fetch!(request(controller.signal)))
    await new Promise((resolve) => setTimeout(resolve, 10))
    controller.abort(new TransferError({ message: "aborted", transport: "e" }))
    await fetching
    expect(events).toEqual(["interrupted"])
  })

  it("keeps each registration's scope open until its object is released, and closes a failed one's at once", async () => {
    const events: Array<string> = []
    let refuse = false
    const face = promiseFace(
      defineEffectTransport({
        name: "e",
        capabilities: oneSided,
        fetch: () => Effect.void,
        register: ({ objectId }) =>
          Effect.gen(function* () {
            yield* Effect.addFinalizer(() => Effect.sync(() => events.push(`closed ${objectId}`)))
            if (refuse) return yield* Effect.fail(new ProtocolError({ message: "refused" }))
            return objectId
          }),
      }),
    )
    expect(await face.extractMetadata!(object)).toBe("p.1")
    expect(events).toEqual([])
    await face.release!(object)
    await face.release!(object)
    expect(events).toEqual(["closed p.1"])
    refuse = true
    expect(await rejection(Promise.resolve(face.extractMetadata!({ ...object, objectId: "p.2" })))).toBeInstanceOf(ProtocolError)
    expect(events).toEqual(["closed p.1", "closed p.2"])
  })
})
