/**
 * The Effect face of transport-gloo: core's cluster layer with gloo among its transports, gloo groups
 * as scoped resources (destroyed when their scope closes), and the status as an Effect. Failures are
 * core's typed errors (`_tag`s MissingGroupError, GroupConflictError, TransferError, TimeoutError,
 * DeviceError, ProtocolError, NativeLibraryError, ...); the other operations are core's
 * `TensorlaneCluster` Effects (spawn, get, put, broadcast, inspect).
 */
import { type CollectiveGroup, type GroupOptions, NativeLibraryError, type StartOptions, TensorlaneCluster, type TensorlaneError } from "@tensorlane/core"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { type GlooStatus, glooStatus as statusOf } from "./glooStatus.js"
import { PACKAGE } from "./internal/loadAddon.js"

/** A cluster for the layer's scope, with gloo loaded beside `options.transports`. */
export const layer = (options: StartOptions = {}): Layer.Layer<TensorlaneCluster.TensorlaneCluster, TensorlaneError> =>
  TensorlaneCluster.layer({ ...options, transports: [...new Set([...(options.transports ?? []), PACKAGE])] })

/** A gloo group of `actors` for the scope: connected on acquisition, destroyed when the scope closes. */
export const group = (
  actors: ReadonlyArray<{ actorId: string }>,
  options: Omit<GroupOptions, "backend"> = {},
): Effect.Effect<CollectiveGroup, TensorlaneError, TensorlaneCluster.TensorlaneCluster | Scope.Scope> =>
  TensorlaneCluster.collectiveGroup(actors, { ...options, backend: "gloo" })

/** The addon and libgloo this process loaded; NativeLibraryError (every path tried, and the fix) when they cannot load. */
export const glooStatus: Effect.Effect<GlooStatus, NativeLibraryError> = Effect.suspend(() => {
  try {
    return Effect.succeed(statusOf())
  } catch (error) {
    return error instanceof NativeLibraryError ? Effect.fail(error) : Effect.die(error)
  }
})
