/**
 * The Effect face of transport-gloo: a layer that adds gloo to a cluster layer, core's cluster layer
 * with gloo loaded, gloo groups as scoped resources (destroyed when their scope closes), and the
 * status as an Effect. The other operations are core's `TensorlaneCluster` Effects (spawn, get, put,
 * broadcast, inspect).
 */
import { type CollectiveGroup, type GroupOptions, type NativeLibraryError, type StartOptions, TensorlaneCluster } from "@tensorlane/core"
import { attempt } from "@tensorlane/core/plugin"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { type GlooStatus, glooStatus as statusOf } from "./glooStatus.js"
import { PACKAGE } from "./Loader.js"

/** Adds gloo to the cluster layer it is provided to (it merges with other transports' layers). */
export const transport: Layer.Layer<never> = TensorlaneCluster.transport(PACKAGE)

/** A cluster for the layer's scope, with gloo loaded beside `options.transports`. */
export const layer = (options: StartOptions = {}): Layer.Layer<TensorlaneCluster.TensorlaneCluster, TensorlaneCluster.StartFailure> =>
  TensorlaneCluster.layer(options).pipe(Layer.provide(transport))

/** A gloo group of `actors` for the scope: connected on acquisition, destroyed when the scope closes. */
export const group = (
  actors: ReadonlyArray<{ actorId: string }>,
  options: Omit<GroupOptions, "backend"> = {},
): Effect.Effect<CollectiveGroup, TensorlaneCluster.GroupCreationFailure, TensorlaneCluster.TensorlaneCluster | Scope.Scope> =>
  TensorlaneCluster.collectiveGroup(actors, { ...options, backend: "gloo" })

/** The addon and libgloo this process loaded; NativeLibraryError (every path tried, and the fix) when they cannot load. */
export const glooStatus: Effect.Effect<GlooStatus, NativeLibraryError> = attempt(statusOf)
