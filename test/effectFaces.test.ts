/**
 * The public Effect faces: each operation names the errors it can raise (type-level assertions,
 * checked by `tsc -p tsconfig.json`) and fails with them, not with defects; the layers of several
 * transports merge into one cluster that loads them all.
 */
import {
  type ActorHandle,
  type ClusterClosedError,
  type ClusterInspection,
  type DeviceError,
  type InvalidArgumentError,
  type InvalidSettingError,
  type NativeLibraryError,
  type ObjectFreedError,
  type ShapeError,
  TensorlaneCluster,
  type TransferError,
  type WrongClusterError,
} from "@tensorlane/core"
import { SymmetricMemory } from "@tensorlane/symmetric-mem"
import { GlooEffect, type GlooStatus } from "@tensorlane/transport-gloo"
import { NcclEffect, type NcclMemPool, type NcclStatus } from "@tensorlane/transport-nccl"
import { NixlEffect, type NixlStatus } from "@tensorlane/transport-nixl"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { describe, expect, expectTypeOf, it } from "vitest"
import { Worker } from "./fixtures/actors.ts"

type Cluster = TensorlaneCluster.TensorlaneCluster

describe("error channels", () => {
  it("name what each operation can raise", () => {
    expectTypeOf(TensorlaneCluster.kill).returns.toEqualTypeOf<Effect.Effect<void, ClusterClosedError | InvalidArgumentError | WrongClusterError, Cluster>>()
    expectTypeOf(TensorlaneCluster.cancel).returns.toEqualTypeOf<Effect.Effect<void, ClusterClosedError | WrongClusterError | ObjectFreedError | InvalidArgumentError, Cluster>>()
    expectTypeOf(TensorlaneCluster.inspect).returns.toEqualTypeOf<Effect.Effect<ClusterInspection, ClusterClosedError | InvalidArgumentError | TransferError, Cluster>>()
    expectTypeOf(TensorlaneCluster.spawn<typeof Worker>).returns.toEqualTypeOf<Effect.Effect<Array<ActorHandle<typeof Worker>>, TensorlaneCluster.CallFailure, Cluster>>()
    expectTypeOf(TensorlaneCluster.layer).returns.toEqualTypeOf<Layer.Layer<Cluster, TensorlaneCluster.StartFailure>>()
    expectTypeOf(GlooEffect.glooStatus).toEqualTypeOf<Effect.Effect<GlooStatus, NativeLibraryError>>()
    expectTypeOf(NixlEffect.nixlStatus).toEqualTypeOf<Effect.Effect<NixlStatus, NativeLibraryError | InvalidSettingError>>()
    expectTypeOf(NcclEffect.ncclStatus).toEqualTypeOf<Effect.Effect<NcclStatus, NativeLibraryError>>()
    expectTypeOf(NcclEffect.createNcclMemPool).returns.toEqualTypeOf<Effect.Effect<NcclMemPool, InvalidSettingError | DeviceError | ShapeError, Scope.Scope>>()
    expectTypeOf(SymmetricMemory.free).returns.toEqualTypeOf<Effect.Effect<void, SymmetricMemory.FreeFailure>>()
  })
})

describe("interruption", () => {
  it("an interrupted spawn ends the actors it was starting once they are up", async () => {
    const program = Effect.gen(function* () {
      const cluster = yield* TensorlaneCluster.TensorlaneCluster
      const actors = () => Effect.promise(async () => Object.keys((await cluster.inspect()).processes).length - 1)
      // How long three actors take to start here: the interrupted spawn's are waited for twice as long.
      const started = Date.now()
      for (const actor of yield* TensorlaneCluster.spawn(Worker, { count: 3 })) yield* TensorlaneCluster.kill(actor)
      const spawnMs = Date.now() - started
      const timedOut = yield* Effect.flip(TensorlaneCluster.spawn(Worker, { count: 3 }).pipe(Effect.timeout("50 millis")))
      yield* Effect.sleep(Math.max(2 * spawnMs, 2000))
      return { timedOut: timedOut._tag, after: yield* actors() }
    })
    const outcome = await Effect.runPromise(program.pipe(Effect.provide(TensorlaneCluster.layer())))
    expect(outcome).toMatchObject({ timedOut: "TimeoutError", after: 0 })
  })
})

describe("transport layers", () => {
  it("merge into one cluster that loads every transport, whose operations fail with their typed errors", async () => {
    const transports = Layer.mergeAll(GlooEffect.transport, NixlEffect.transport, SymmetricMemory.transport)
    const program = Effect.gen(function* () {
      const [a, b] = yield* TensorlaneCluster.spawn(Worker, { count: 2 })
      // 1 MiB: past the 64 KiB that travel inline, so that NIXL moves it.
      const sum = yield* TensorlaneCluster.get(b.sum(a.make.options({ tensorTransport: "nixl" })(1 << 20)))
      const names = (yield* TensorlaneCluster.TensorlaneCluster).transportNames
      const notAnActor = yield* Effect.flip(TensorlaneCluster.kill({ actorId: "nobody" }))
      return { sum, names: [...names].sort(), refused: notAnActor._tag }
    })
    const outcome = await Effect.runPromise(program.pipe(Effect.provide(TensorlaneCluster.layer().pipe(Layer.provide(transports)))))
    expect(outcome).toEqual({ sum: 1 << 18, names: ["gloo", "nixl", "object-store", "shm"], refused: "InvalidArgumentError" })
  })
})
