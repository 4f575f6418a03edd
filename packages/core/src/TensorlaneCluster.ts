/**
 * The Effect face of the driver: the cluster as a service provided by a scoped layer (started on
 * acquisition, shut down on release), and the driver operations as Effects whose failures are the
 * typed errors of `Errors.ts`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ActorDefinition } from "./Actor.js"
import { type Cluster, type ClusterInspection, type CollectiveGroup, type GroupOptions, type SpawnOptions, type StartOptions, start } from "./Cluster.js"
import type { TensorlaneError } from "./Errors.js"
import type { GetOptions, PutOptions } from "./InActor.js"
import type { ObjectRef } from "./ObjectRef.js"

export class TensorlaneCluster extends Context.Service<TensorlaneCluster, Cluster>()("@tensorlane/core/TensorlaneCluster") {}

const isTensorlaneError = (error: unknown): error is TensorlaneError =>
  error instanceof Error && typeof (error as { _tag?: unknown })._tag === "string"

/** A Promise of the Promise face as an Effect: tensorlane's errors are failures, anything else a defect. */
const attempt = <A>(run: () => Promise<A>): Effect.Effect<A, TensorlaneError> =>
  Effect.tryPromise({ try: run, catch: (error) => error }).pipe(
    Effect.catch((error) => (isTensorlaneError(error) ? Effect.fail(error) : Effect.die(error))),
  )

/**
 * Starts a cluster for the layer's scope and shuts it down when the scope closes. Transfer spans go
 * to the tracer of the Effect that builds the layer, unless `options.tracer` names another.
 */
export const layer = (options?: StartOptions): Layer.Layer<TensorlaneCluster, TensorlaneError> =>
  Layer.effect(
    TensorlaneCluster,
    Effect.flatMap(Effect.tracer, (tracer) =>
      Effect.acquireRelease(attempt(() => start({ tracer, ...options })), (cluster) => Effect.promise(() => cluster.shutdown())),
    ),
  )

const withCluster = <A>(run: (cluster: Cluster) => Promise<A>): Effect.Effect<A, TensorlaneError, TensorlaneCluster> =>
  Effect.gen(function* () {
    const cluster = yield* TensorlaneCluster
    return yield* attempt(() => run(cluster))
  })

export const spawn = <D extends ActorDefinition>(definition: D, options?: SpawnOptions) =>
  withCluster((cluster) => cluster.spawn(definition, options))

export const get = <T>(ref: ObjectRef<T>, options?: GetOptions): Effect.Effect<T, TensorlaneError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.get(ref, options) as Promise<T>)

export const getAll = <T>(refs: ReadonlyArray<ObjectRef<T>>, options?: GetOptions): Effect.Effect<Array<T>, TensorlaneError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.get(refs, options) as Promise<Array<T>>)

export const put = <T>(value: T, options?: PutOptions) => withCluster((cluster) => cluster.put(value, options))

/** A collective group for the scope: destroyed when the scope closes. */
export const collectiveGroup = (actors: ReadonlyArray<{ actorId: string }>, options: GroupOptions) =>
  Effect.acquireRelease(
    withCluster((cluster) => cluster.createCollectiveGroup(actors, options)),
    (group: CollectiveGroup) => Effect.promise(() => group.destroy()),
  )

/** `cluster.broadcast`: a received copy of `ref`'s object in each receiver, in one operation where its transport can. */
export const broadcast = (
  ref: ObjectRef<unknown>,
  receivers: ReadonlyArray<{ actorId: string }>,
  options?: { timeoutMs?: number },
): Effect.Effect<void, TensorlaneError, TensorlaneCluster> => withCluster((cluster) => cluster.broadcast(ref, receivers, options))

/** `cluster.kill`: ends an actor at once; its pending calls and the objects it produced fail with ActorDiedError. */
export const kill = (actor: { actorId: string }): Effect.Effect<void, TensorlaneError, TensorlaneCluster> => withCluster((cluster) => cluster.kill(actor))

/** `cluster.cancel`: the call that makes `ref` fails with CancelledError; a queued one never runs, a running one's signal aborts. */
export const cancel = (ref: ObjectRef<unknown>): Effect.Effect<void, TensorlaneError, TensorlaneCluster> =>
  withCluster(async (cluster) => cluster.cancel(ref))

export const inspect = (options?: { timeoutMs?: number }): Effect.Effect<ClusterInspection, TensorlaneError, TensorlaneCluster> =>
  withCluster((cluster) => cluster.inspect(options))
