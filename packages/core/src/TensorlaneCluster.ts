/**
 * The Effect face of the driver: the cluster as a service provided by a scoped layer (started on
 * acquisition, shut down on release) that loads the transports its options name and those that
 * transport layers add, and the driver operations as Effects that fail with the errors each can
 * raise.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { ActorDefinition, ActorHandle } from "./Actor.js"
import {
  Cluster,
  type ClusterInspection,
  type CollectiveGroup,
  type GroupOptions,
  type HostInfo,
  type SpawnOptions,
  type StartOptions,
} from "./Cluster.js"
import type {
  ApplicationError,
  CertificateError,
  ClusterClosedError,
  ClusterConfigError,
  CrossHostError,
  DeviceError,
  InvalidArgumentError,
  InvalidSettingError,
  MessageTooLargeError,
  MissingGroupError,
  ObjectFreedError,
  PackageError,
  TensorlaneError,
  TimeoutError,
  TransferError,
  TransportLoadError,
  UnknownTransportError,
  UnsupportedOperationError,
  WrongClusterError,
} from "./Errors.js"
import type { GetOptions, PutOptions } from "./InActor.js"
import type { ObjectRef } from "./ObjectRef.js"
import type { GroupFailure, RegistrationFailure } from "./Transport.js"
import { attempt } from "./internal/attempt.js"
import { callerFolder } from "./internal/callerModule.js"

export class TensorlaneCluster extends Context.Service<TensorlaneCluster, Cluster>()("@tensorlane/core/TensorlaneCluster") {}

/**
 * What a call's result can fail with: any typed error, core's or a package's. A failed call's error
 * keeps its class across processes, whatever raised it (the method itself, `init`, the transfer of
 * an argument, the actor's death), and reaches every call that depends on its object.
 */
export type CallFailure = TensorlaneError | PackageError

/**
 * Starting the cluster: a bad option or setting (TENSORLANE_*, a TMPDIR it cannot make its folder in),
 * a transport module that does not load, a transfer agent that does not start; with a cluster config,
 * a config or certificate that is not what it must be.
 */
export type StartFailure =
  | InvalidArgumentError
  | InvalidSettingError
  | TransportLoadError
  | TransferError
  | ApplicationError
  | ClusterConfigError
  | CertificateError

/** Storing a value: the value or its refs refused, its transport refused or failing to register it. */
export type PutFailure =
  | ClusterClosedError
  | WrongClusterError
  | ObjectFreedError
  | InvalidArgumentError
  | MessageTooLargeError
  | UnknownTransportError
  | UnsupportedOperationError
  | DeviceError
  | ApplicationError
  | RegistrationFailure

/** Creating a group: refused arguments, then any member's transport failing to join it. */
export type GroupCreationFailure =
  | ClusterClosedError
  | WrongClusterError
  | InvalidArgumentError
  | UnknownTransportError
  | UnsupportedOperationError
  | MissingGroupError
  | CrossHostError
  | ApplicationError
  | GroupFailure

/** The prefix of the context keys of transport layers: a key per transport module. */
const TRANSPORT_KEY = "@tensorlane/core/TensorlaneCluster/transport:"

/**
 * Adds the transport module `specifier` to the cluster layer it is provided to, which then loads it
 * with the transports of its own options. Each transport package exports its own (`GlooEffect.transport`,
 * ...); merged, they give one cluster that loads them all:
 * `TensorlaneCluster.layer().pipe(Layer.provide(Layer.mergeAll(GlooEffect.transport, NixlEffect.transport)))`.
 */
export const transport = (specifier: string): Layer.Layer<never> =>
  Layer.succeedContext(Context.makeUnsafe<never>(new Map([[`${TRANSPORT_KEY}${specifier}`, specifier]])))

/**
 * Starts a cluster for the layer's scope and shuts it down when the scope closes. Transfer spans go
 * to the tracer of the Effect that builds the layer, unless `options.tracer` names another.
 */
export const layer = (options: StartOptions = {}): Layer.Layer<TensorlaneCluster, StartFailure> => {
  // Relative transport paths are the caller's: it is on the stack now, not when the layer is built.
  const base = callerFolder()
  return Layer.effect(
    TensorlaneCluster,
    Effect.gen(function* () {
      const tracer = yield* Effect.tracer
      const context = yield* Effect.context<never>()
      const added = [...context.mapUnsafe].flatMap(([key, specifier]) => (key.startsWith(TRANSPORT_KEY) ? [specifier as string] : []))
      const transports = [...new Set([...(options.transports ?? []), ...added])]
      return yield* Effect.acquireRelease(attempt<Cluster, StartFailure>(() => Cluster.create({ tracer, ...options, transports }, base)), (cluster) =>
        Effect.promise(() => cluster.shutdown()),
      )
    }),
  )
}

const withCluster = <A, E extends PackageError>(run: (cluster: Cluster) => A | Promise<A>): Effect.Effect<A, E, TensorlaneCluster> =>
  Effect.gen(function* () {
    const cluster = yield* TensorlaneCluster
    return yield* attempt<A, E>(() => run(cluster))
  })

/** Interrupted, it ends the actors it was starting once they are up: nothing else would hold their handles. */
export const spawn = <D extends ActorDefinition>(definition: D, options?: SpawnOptions): Effect.Effect<Array<ActorHandle<D>>, CallFailure, TensorlaneCluster> =>
  Effect.gen(function* () {
    const cluster = yield* TensorlaneCluster
    let spawning: Promise<Array<ActorHandle<D>>> | undefined
    return yield* attempt<Array<ActorHandle<D>>, CallFailure>(() => (spawning = cluster.spawn(definition, options))).pipe(
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          void spawning?.then(
            (actors) => Promise.allSettled(actors.map((actor) => cluster.kill(actor))),
            () => undefined,
          )
        }),
      ),
    )
  })

export const get = <T>(ref: ObjectRef<T>, options?: GetOptions): Effect.Effect<T, CallFailure, TensorlaneCluster> =>
  withCluster((cluster) => cluster.get(ref, options) as Promise<T>)

export const getAll = <T>(refs: ReadonlyArray<ObjectRef<T>>, options?: GetOptions): Effect.Effect<Array<T>, CallFailure, TensorlaneCluster> =>
  withCluster((cluster) => cluster.get(refs, options) as Promise<Array<T>>)

export const put = <T>(value: T, options?: PutOptions): Effect.Effect<ObjectRef<T>, PutFailure, TensorlaneCluster> =>
  withCluster((cluster) => cluster.put(value, options))

/** A collective group for the scope: destroyed when the scope closes. */
export const collectiveGroup = (
  actors: ReadonlyArray<{ actorId: string }>,
  options: GroupOptions,
): Effect.Effect<CollectiveGroup, GroupCreationFailure, TensorlaneCluster | Scope.Scope> =>
  Effect.acquireRelease(
    withCluster<CollectiveGroup, GroupCreationFailure>((cluster) => cluster.createCollectiveGroup(actors, options)),
    (group) => Effect.promise(() => group.destroy()),
  )

/**
 * `cluster.broadcast`: a received copy of `ref`'s object in each receiver, in one operation where its
 * transport can. It fails as the object's call did, when that failed.
 */
export const broadcast = (
  ref: ObjectRef<unknown>,
  receivers: ReadonlyArray<{ actorId: string }>,
  options?: { timeoutMs?: number },
): Effect.Effect<void, CallFailure, TensorlaneCluster> => withCluster((cluster) => cluster.broadcast(ref, receivers, options))

/** `cluster.kill`: ends an actor at once; its pending calls and the objects it produced fail with ActorDiedError. */
export const kill = (actor: { actorId: string }): Effect.Effect<void, ClusterClosedError | InvalidArgumentError | WrongClusterError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.kill(actor))

/** `cluster.cancel`: the call that makes `ref` fails with CancelledError; a queued one never runs, a running one's signal aborts. */
export const cancel = (ref: ObjectRef<unknown>): Effect.Effect<void, ClusterClosedError | WrongClusterError | ObjectFreedError | InvalidArgumentError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.cancel(ref))

/** The hosts of a cluster across hosts whose nodes answer, with what each reports (`Cluster.hosts`). */
export const hosts = (): Effect.Effect<Array<HostInfo>, ClusterClosedError | UnsupportedOperationError | TimeoutError | InvalidArgumentError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.hosts())

/** What every process holds; an actor that does not answer in time is listed as unresponsive, not a failure. */
export const inspect = (options?: { timeoutMs?: number }): Effect.Effect<ClusterInspection, ClusterClosedError | InvalidArgumentError | TransferError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.inspect(options))
