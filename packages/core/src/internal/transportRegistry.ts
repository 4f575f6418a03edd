/**
 * Loads transports by module specifier. Every process (driver main thread, actor main threads and
 * every transfer agent) imports the same modules, so no code is shipped by value.
 */
import { isAbsolute, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { Storage } from "../Allocator.js"
import { TransportLoadError, UnknownTransportError } from "../Errors.js"
import { type DefinedTransport, type FetchRequest, type PromiseTransport, type TensorTransport, defineTransport, isTensorTransport } from "../Transport.js"
import { importModule } from "./typeScript.js"

export const objectStoreName = "object-store"

/**
 * The built-in default: bytes travel through the control plane, read by the thread that needs them
 * from the producer's agent (which serves them even while the producer's main thread is busy).
 */
export const objectStoreTransport = (fetch: (request: FetchRequest) => Promise<void>): DefinedTransport =>
  defineTransport({
    name: objectStoreName,
    // A reply's body may be read into the receive buffers after its fetch was given up on.
    capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, tracksBuffers: true, inlinesSmallValues: true, anyThread: true },
    fetch,
  })

/**
 * Relative paths are taken from `base`, the folder of the user's module that starts the cluster, and
 * made file URLs, so that every process finds the same file whatever its working directory.
 */
export const normalizeSpecifier = (specifier: string, base: string): string =>
  specifier.startsWith(".") || isAbsolute(specifier) ? pathToFileURL(resolve(base, specifier)).href : specifier

/** An export shaped like a transport: made by `defineEffectTransport` or `defineTransport`, or a plain object written with Promises. */
const isTransportShaped = (value: unknown): value is PromiseTransport | TensorTransport =>
  typeof value === "object" && value !== null && typeof (value as PromiseTransport).name === "string" && typeof (value as PromiseTransport).capabilities === "object"

/** The contract of an export: itself when written in Effect, else what `defineTransport` adapted (now, for a plain object). */
const contractOf = (transport: PromiseTransport | TensorTransport): TensorTransport =>
  isTensorTransport(transport) ? transport : defineTransport(transport).effect

const importTransports = async (specifier: string): Promise<Array<TensorTransport>> => {
  let module: Record<string, unknown>
  try {
    module = await importModule(specifier, "transport module")
  } catch (cause) {
    const notFound = (cause as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND" && !specifier.startsWith("file:")
    throw new TransportLoadError({
      message: `cannot import transport module "${specifier}": ${cause instanceof Error ? cause.message : String(cause)}${notFound ? ". Is the package installed next to @tensorlane/core?" : ""}`,
      specifier,
    })
  }
  const found = [...new Set(Object.values(module).filter(isTransportShaped))]
  if (found.length === 0) {
    throw new TransportLoadError({
      message: `module "${specifier}" exports no TensorTransport (an object with a lowercase name and capabilities)`,
      specifier,
    })
  }
  // A transport may be exported twice (by name and as default): one contract each.
  return [...new Set(found.map(contractOf))]
}

export interface TransportDeps {
  readonly fetchFrom: (request: FetchRequest) => Promise<void>
}

export const loadTransports = async (
  specifiers: ReadonlyArray<string>,
  deps: TransportDeps,
): Promise<Map<string, TensorTransport>> => {
  const registry = new Map<string, TensorTransport>([[objectStoreName, objectStoreTransport(deps.fetchFrom).effect]])
  for (const specifier of specifiers) {
    for (const transport of await importTransports(specifier)) {
      const existing = registry.get(transport.name)
      if (existing !== undefined && existing !== transport) {
        throw new TransportLoadError({ message: `two transports are named "${transport.name}" (the second from "${specifier}")`, specifier })
      }
      registry.set(transport.name, transport)
    }
  }
  return registry
}

export const unknownTransport = (name: string, registered: Iterable<string>): UnknownTransportError => {
  const names = [...registered]
  return new UnknownTransportError({
    message: `unknown tensor transport "${name}"; registered transports: ${names.join(", ")}. Name its module in start({ transports }).`,
    transport: name,
    registered: names,
  })
}

/**
 * The Promise functions the runtime calls for a transport: those of one written with Promises as
 * they are (no fiber per transfer); those of one written in Effect, each hook run to a Promise
 * that settles as its Effect ends (the request's signal interrupts it), each registration's scope
 * kept until its object is released.
 */
export const promiseFace = (transport: TensorTransport): PromiseTransport => transport.promise ?? runEffectHooks(transport)

/** The Promise faces of loaded transports, by name: what a thread's runtime calls. */
export const promiseFaces = (transports: ReadonlyMap<string, TensorTransport>): Map<string, PromiseTransport> =>
  new Map([...transports].map(([name, transport]) => [name, promiseFace(transport)]))

/** Runs a hook's Effect: its failure, or its defect, rejects the Promise as it is. */
const run = <A>(effect: Effect.Effect<A, unknown>, signal?: AbortSignal): Promise<A> =>
  Effect.runPromiseExit(effect, signal === undefined ? undefined : { signal }).then((exit) =>
    Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause)),
  )

const runEffectHooks = (t: TensorTransport): PromiseTransport => {
  const hook =
    <R extends object>(effect: (request: R) => Effect.Effect<void, unknown>) =>
    (request: R) =>
      run(effect(request), (request as { readonly signal?: AbortSignal }).signal)
  const register = t.register
  /** The scope of each object registered here, closed when the object is released. */
  const registrations = new Map<string, Scope.Closeable>()
  return {
    name: t.name,
    capabilities: t.capabilities,
    ...(register === undefined
      ? {}
      : {
          extractMetadata: async (object) => {
            const scope = Scope.makeUnsafe()
            try {
              const metadata = await run(Scope.provide(scope)(register(object)))
              registrations.set(object.objectId, scope)
              return metadata
            } catch (error) {
              await run(Scope.close(scope, Exit.void))
              throw error
            }
          },
          release: async (object) => {
            const scope = registrations.get(object.objectId)
            registrations.delete(object.objectId)
            if (scope !== undefined) await run(Scope.close(scope, Exit.void))
          },
        }),
    ...(t.fetch === undefined ? {} : { fetch: hook(t.fetch) }),
    ...(t.send === undefined ? {} : { send: hook(t.send) }),
    ...(t.receive === undefined ? {} : { receive: hook(t.receive) }),
    ...(t.allreduce === undefined ? {} : { allreduce: hook(t.allreduce) }),
    ...(t.broadcast === undefined ? {} : { broadcast: hook(t.broadcast) }),
    ...(t.createGroup === undefined ? {} : { createGroup: hook(t.createGroup) }),
    ...(t.destroyGroup === undefined ? {} : { destroyGroup: (name: string) => run(t.destroyGroup!(name)) }),
    ...(t.inspect === undefined ? {} : { inspect: t.inspect }),
    ...(t.registered === undefined ? {} : { registered: (storage: Storage) => t.registered!(storage) }),
    ...(t.prepare === undefined ? {} : { prepare: () => run(t.prepare!) }),
    ...(t.close === undefined ? {} : { close: () => run(t.close!) }),
  }
}
