/**
 * Actor definitions. An actor is defined in a module so that an actor process can import it by URL
 * and take the export named by `defineActor`.
 */
import { InvalidArgumentError } from "./Errors.js"
import { checkOptions, describe } from "./internal/arguments.js"
import type { ObjectRef } from "./ObjectRef.js"

export interface MethodOptions {
  /** Tensors returned by the method stay in the actor and move over this transport. Default: "object-store". */
  readonly tensorTransport?: string
}

export type MethodFn<S> = (state: S, ...args: Array<any>) => unknown

const methodBrand = Symbol.for("tensorlane.Method")

export interface MarkedMethod<F> {
  readonly [methodBrand]: true
  readonly options: MethodOptions
  readonly fn: F
}

/** Marks a method with options (its tensor transport). */
export const method = <F extends MethodFn<any>>(options: MethodOptions, fn: F): MarkedMethod<F> => {
  const checked = checkOptions(options, "method options")
  if (typeof fn !== "function") throw new InvalidArgumentError({ message: `method(options, fn) takes a function, not ${describe(fn)}`, argument: "fn" })
  return { [methodBrand]: true, options: checked, fn }
}

export const isMarkedMethod = (value: unknown): value is MarkedMethod<MethodFn<unknown>> =>
  typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[methodBrand] === true

export interface InitContext {
  /** Position of this actor among those spawned by the same `spawn` call. */
  readonly index: number
  readonly actorId: string
}

export interface ActorSpec<S, M> {
  readonly init: (context: InitContext) => S | Promise<S>
  readonly methods: M
  /** How many calls may run at once in this actor (they start in submission order). Default 1. */
  readonly maxConcurrency?: number
}

const actorBrand = Symbol.for("tensorlane.ActorDefinition")

export interface ActorDefinition<S = any, M = any> {
  readonly [actorBrand]: true
  readonly moduleUrl: string
  readonly name: string
  readonly spec: ActorSpec<S, M>
}

/**
 * An export's name as actor ids carry it (`<name>-<n>`): an identifier, at most this long, so that
 * its agent's socket (`$TMPDIR/tensorlane-XXXXXX/<name>-<n>.sock`) stays within a Unix socket
 * path's 107 bytes.
 */
const MAX_ACTOR_NAME_LENGTH = 64

const checkDefinition = (moduleUrl: unknown, name: unknown, spec: unknown): void => {
  const refuse = (message: string, argument: string): never => {
    throw new InvalidArgumentError({ message, argument })
  }
  if (typeof moduleUrl !== "string" || moduleUrl === "") refuse(`defineActor takes the module's import.meta.url first, not ${describe(moduleUrl)}`, "moduleUrl")
  if (typeof name !== "string" || !/^[\p{ID_Start}$_][\p{ID_Continue}$\u200c\u200d]*$/u.test(name) || name.length > MAX_ACTOR_NAME_LENGTH) {
    refuse(`defineActor's name is the name its definition is exported under (an identifier of at most ${MAX_ACTOR_NAME_LENGTH} characters), not ${describe(name)}`, "name")
  }
  const fields = spec as Partial<Record<keyof ActorSpec<unknown, unknown>, unknown>> | null
  if (typeof fields !== "object" || fields === null) refuse(`defineActor takes a spec { init, methods }, not ${describe(spec)}`, "spec")
  if (typeof fields!.init !== "function") refuse(`spec.init of actor ${name as string} must be a function, not ${describe(fields!.init)}`, "spec.init")
  if (typeof fields!.methods !== "object" || fields!.methods === null) refuse(`spec.methods of actor ${name as string} must be an object of methods, not ${describe(fields!.methods)}`, "spec.methods")
}

/**
 * Defines an actor. `moduleUrl` is the defining module's `import.meta.url` and `name` the name it is
 * exported under, so that every actor process finds the same definition.
 */
export const defineActor = <S, M extends Record<string, MethodFn<S> | MarkedMethod<MethodFn<S>>>>(
  moduleUrl: string,
  name: string,
  spec: ActorSpec<S, M>,
): ActorDefinition<S, M> => {
  checkDefinition(moduleUrl, name, spec)
  const concurrency = spec.maxConcurrency
  if (concurrency !== undefined && !(concurrency === Infinity || (Number.isInteger(concurrency) && concurrency >= 1))) {
    throw new InvalidArgumentError({ message: `maxConcurrency of actor ${name} must be an integer >= 1 or Infinity, not ${describe(concurrency)}`, argument: "spec.maxConcurrency" })
  }
  for (const [key, value] of Object.entries(spec.methods)) {
    if (typeof value !== "function" && !isMarkedMethod(value)) {
      throw new InvalidArgumentError({ message: `method "${key}" of actor ${name} must be a function or method(options, fn)`, argument: "spec.methods" })
    }
  }
  return { [actorBrand]: true, moduleUrl, name, spec }
}

export const isActorDefinition = (value: unknown): value is ActorDefinition =>
  typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[actorBrand] === true

/** The function and options of a method, marked or not. */
export const methodOf = (
  definition: ActorDefinition,
  name: string,
): { fn: MethodFn<unknown>; options: MethodOptions } | undefined => {
  const value = (definition.spec.methods as Record<string, unknown>)[name]
  if (isMarkedMethod(value)) return { fn: value.fn, options: value.options }
  if (typeof value === "function") return { fn: value as MethodFn<unknown>, options: {} }
  return undefined
}

// ---- Types of actor handles: each method takes its arguments, any of which may be given as refs.

/** An argument may be given as the value itself or, anywhere inside it, as a ref to such a value. */
export type Refable<T> =
  | T
  | ObjectRef<T>
  | (T extends ReadonlyArray<infer E> ? ReadonlyArray<Refable<E>> : never)
  | (T extends object ? (T extends ReadonlyArray<any> | Function ? never : { [K in keyof T]: Refable<T[K]> }) : never)

type Fn<M> = M extends MarkedMethod<infer F> ? F : M

type Params<M> = Fn<M> extends (state: any, ...args: infer A) => any ? A : never
type RefableArgs<A extends ReadonlyArray<unknown>> = { [K in keyof A]: Refable<A[K]> }
type Return<M> = Fn<M> extends (...args: Array<any>) => infer R ? Awaited<R> : never

export interface CallOptions {
  readonly tensorTransport?: string
}

export type ActorMethod<M> = ((...args: RefableArgs<Params<M>>) => ObjectRef<Return<M>>) & {
  /** The same method with per-call options (e.g. another tensor transport for this call's result). */
  readonly options: (options: CallOptions) => (...args: RefableArgs<Params<M>>) => ObjectRef<Return<M>>
}

export type ActorHandle<D extends ActorDefinition> = {
  readonly [K in keyof D["spec"]["methods"]]: ActorMethod<D["spec"]["methods"][K]>
} & {
  readonly actorId: string
  readonly definition: D
}
