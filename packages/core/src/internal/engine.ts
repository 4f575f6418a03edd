/**
 * Effect's cluster engine under a cluster across hosts: each host's node is a runner registered in
 * SqlRunnerStorage on the cluster's Postgres, serving the "TensorlaneNode" entity of its host alone
 * (a shard group per host); the driver joins as a client-only sharding. The engine's connections
 * between runners, and from the driver to runners, are under the cluster's mutual TLS. Membership is
 * the runners the storage holds (their heartbeats refresh with their shard locks), health is the
 * engine's runner pings, and the entity's RPCs are routed by the engine to the host's runner.
 */
import { createHash } from "node:crypto"
import * as NodeSocket from "@effect/platform-node-shared/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node-shared/NodeSocketServer"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import {
  ClusterSchema,
  Entity,
  MessageStorage,
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerStorage,
  ShardingConfig,
  SocketRunner,
  SqlRunnerStorage,
} from "effect/cluster"
import { Rpc, RpcClient, RpcSerialization } from "effect/rpc"
import { Socket } from "effect/socket"
import type { ClusterConfig, ClusterHost, ClusterTls } from "../ClusterConfig.js"
import { InvalidArgumentError } from "../Errors.js"
import { HostInfo } from "./messages.js"

/**
 * The engine's timings, short enough that a dead host or a cut link leaves the storage's runners
 * (its heartbeat stops) within SHARD_LOCK_EXPIRATION_MS; the defaults take about a minute.
 */
export const SHARD_LOCK_EXPIRATION_MS = 3_000
const SHARD_LOCK_REFRESH_MS = 1_000
/** How long one ping of a runner, or one read of the storage, may take. */
export const ENGINE_CALL_TIMEOUT_MS = 1_000

/** The engine's port on a host: the one after the node's (the node's own serves actor connections). */
export const runnerPort = (host: ClusterHost): number => host.port + 1

export const runnerAddressOf = (host: ClusterHost): RunnerAddress.RunnerAddress => RunnerAddress.make(host.address, runnerPort(host))

/** The host of a runner's address, if it is one of the config's. */
export const hostAt = (config: ClusterConfig, address: RunnerAddress.RunnerAddress): ClusterHost | undefined =>
  config.hosts.find((h) => h.address === address.host && runnerPort(h) === address.port)

/**
 * A host's node as an entity, one per host (its id is the host's name), served only by that host's
 * runner. Describe: what the node reports of its host. Admit: the node takes spawns of the driver of
 * a cluster (its actor connections, which the node checks are that driver's), under a lease the
 * driver renews on the node's own port (messages.ts). Kill: the node ends that driver's actors.
 */
export const NodeEntity = Entity.make("TensorlaneNode", [
  Rpc.make("Describe", { success: HostInfo }),
  // The node's PROTOCOL_VERSION beside its host: absent from the nodes of releases before it.
  Rpc.make("Admit", {
    payload: { clusterId: Schema.String, driver: Schema.String },
    success: Schema.Struct({ ...HostInfo.fields, protocol: Schema.optional(Schema.Number) }),
    error: InvalidArgumentError,
  }),
  Rpc.make("Kill", { payload: { clusterId: Schema.String } }),
]).annotate(ClusterSchema.ShardGroup, (entityId) => entityId)

const shardingConfig = (config: ClusterConfig, self: ClusterHost | undefined) =>
  ShardingConfig.layer({
    runnerAddress: self === undefined ? Option.none() : Option.some(runnerAddressOf(self)),
    // "default" holds the engine's own singletons (its runner health checks).
    availableShardGroups: ["default", ...config.hosts.map((h) => h.name)],
    assignedShardGroups: self === undefined ? [] : ["default", self.name],
    shardsPerGroup: 1,
    shardLockRefreshInterval: Duration.millis(SHARD_LOCK_REFRESH_MS),
    shardLockExpiration: Duration.millis(SHARD_LOCK_EXPIRATION_MS),
    refreshAssignmentsInterval: Duration.millis(SHARD_LOCK_REFRESH_MS),
    runnerHealthCheckInterval: Duration.millis(SHARD_LOCK_REFRESH_MS),
    entityTerminationTimeout: Duration.seconds(2),
  })

/** Postgres as the cluster's role, under TLS with the server's certificate checked against the config's CA. */
const postgres = (config: ClusterConfig) =>
  PgClient.layer({
    host: config.postgres.host,
    port: config.postgres.port,
    database: config.postgres.database,
    username: config.postgres.user,
    password: Redacted.make(config.postgres.password),
    ssl: { ca: config.postgres.ca, rejectUnauthorized: true },
    connectTimeout: Duration.millis(ENGINE_CALL_TIMEOUT_MS * 2),
    maxConnections: 4,
  })

/** The engine's outgoing connections to runners: TLS under the cluster's CA, the runner's certificate naming its host. */
const clientProtocol = (config: ClusterConfig, credentials: ClusterTls) =>
  Layer.effect(Runners.RpcClientProtocol)(
    Effect.gen(function* () {
      const serialization = yield* RpcSerialization.RpcSerialization
      return {
        codecFor: serialization.codecFor,
        make: Effect.fnUntraced(function* (address: RunnerAddress.RunnerAddress) {
          const host = hostAt(config, address)
          if (host === undefined) return yield* Effect.die(`the runner at ${address.host}:${address.port} is not a host of cluster ${config.name}`)
          const socket = yield* NodeSocket.makeTls({ ...credentials.client(host.name), host: address.host, port: address.port, openTimeout: ENGINE_CALL_TIMEOUT_MS })
          return yield* RpcClient.makeProtocolSocket().pipe(
            Effect.provideService(Socket.Socket, socket),
            Effect.provideService(RpcSerialization.RpcSerialization, serialization),
          )
        }, Effect.orDie),
      }
    }),
  )

/** The engine's runner health: a ping, bounded so that a cut link is told within the 5 s of a host's death. */
const runnerHealth = Layer.effect(RunnerHealth.RunnerHealth)(
  Effect.gen(function* () {
    const runners = yield* Runners.Runners
    return RunnerHealth.RunnerHealth.of({
      isAlive: (address) =>
        runners.ping(address).pipe(Effect.timeout(ENGINE_CALL_TIMEOUT_MS), Effect.retry({ times: 1, schedule: Schedule.spaced(250) }), Effect.isSuccess),
    })
  }),
).pipe(Layer.provide(Runners.layerRpc))

/**
 * The engine's tables are the cluster's own (`<prefix>_runners`, `_locks`, `_runner_migrations`, and
 * its advisory locks), so that clusters sharing a Postgres database never take each other's hosts'
 * shards: the cluster's name where the longest table name stays within Postgres' 63 characters,
 * else a digest of it.
 */
export const engineTablePrefix = (clusterName: string): string => {
  const readable = `tensorlane_${clusterName.replaceAll("-", "_")}`
  return readable.length + "_runner_migrations".length <= 63 ? readable : `tensorlane_${createHash("sha256").update(clusterName).digest("hex").slice(0, 16)}`
}

const storage = (config: ClusterConfig, self: ClusterHost | undefined) =>
  SqlRunnerStorage.layerWith({ prefix: engineTablePrefix(config.name) }).pipe(Layer.provide(postgres(config)), Layer.provideMerge(shardingConfig(config, self)))

/** The engine's messages are a host's description and ids: a frame of 1 MiB is far more than they need. */
const MAX_ENGINE_FRAME_BYTES = 1024 * 1024

const common = (config: ClusterConfig, credentials: ClusterTls, self: ClusterHost | undefined) =>
  Layer.mergeAll(storage(config, self), clientProtocol(config, credentials), MessageStorage.layerNoop).pipe(
    Layer.provideMerge(RpcSerialization.layerSchemaBinary({ maxFrameSize: MAX_ENGINE_FRAME_BYTES })),
  )

/** A host's runner: listening under mutual TLS on the host's address at runnerPort, and serving `entity` (the node's entity layer). */
export const runnerLayer = <E, R>(config: ClusterConfig, host: ClusterHost, credentials: ClusterTls, entity: Layer.Layer<never, E, R>) =>
  entity.pipe(
    Layer.provideMerge(SocketRunner.layer),
    Layer.provide(runnerHealth),
    Layer.provide(NodeSocketServer.layerTls({ ...credentials.server, host: host.address, port: runnerPort(host) })),
    Layer.provideMerge(common(config, credentials, host)),
  )

/** The driver's client-only sharding: it sends the entity's RPCs and reads the storage's runners. */
export const clientLayer = (config: ClusterConfig, credentials: ClusterTls) =>
  SocketRunner.layerClientOnly.pipe(Layer.provideMerge(common(config, credentials, undefined)))

/** The hosts whose runners the storage holds as live and healthy. */
export const liveHosts = (config: ClusterConfig) =>
  Effect.gen(function* () {
    const storage = yield* RunnerStorage.RunnerStorage
    const runners = yield* storage.getRunners.pipe(Effect.timeout(ENGINE_CALL_TIMEOUT_MS))
    const live = new Set(runners.flatMap(([runner, healthy]) => (healthy ? [hostAt(config, runner.address)?.name] : [])))
    return config.hosts.filter((h) => live.has(h.name))
  })
