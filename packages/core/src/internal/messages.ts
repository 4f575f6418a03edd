/**
 * The messages of the control plane. Every header read from a socket is validated against these
 * schemas before it is acted on: a peer can send anything.
 */
import * as Schema from "effect/Schema"
import { ProtocolError } from "../Errors.js"
import { MAX_META_NAMES, metasProblem } from "./wireMetas.js"

const Bytes = Schema.Uint8Array
/**
 * An object's or an actor's id (`Worker-3`, `Worker-3.17`): an export name of at most 64 characters
 * and two counters, so far below this bound; a peer's longer one is not one of ours.
 */
const Id = Schema.String.check(Schema.isMaxLength(256))
/** A group's name: at most 256 characters (createCollectiveGroup), each at most two UTF-16 units. */
const GroupName = Schema.String.check(Schema.isMaxLength(512))

/**
 * What travels about a list of tensors, packed (wireMetas.ts): enough to allocate and validate the
 * receiving buffers. A dtype's or a device's name is at most 64 characters, far above every real one.
 */
const TensorMetas = Schema.Struct({
  names: Schema.Array(Schema.String.check(Schema.isMaxLength(64))).check(Schema.isMaxLength(MAX_META_NAMES)),
  bytes: Bytes,
}).check(Schema.makeFilter(metasProblem, { expected: "tensor metadata" }))

/** A serialized error: name, message and the remote stack. */
export const WireError = Schema.Struct({
  tag: Schema.String,
  name: Schema.String,
  message: Schema.String,
  stack: Schema.String,
  fields: Schema.Record(Schema.String, Schema.Unknown),
})
export type WireError = typeof WireError.Type

/** The owner's record of a ready object, as handed to whoever resolves it. */
export const ObjectInfo = Schema.Struct({
  objectId: Id,
  producer: Id,
  producerAddress: Schema.String,
  transport: Schema.String,
  skeleton: Bytes,
  tensors: TensorMetas,
  /** Tensor bytes of small object-store values, concatenated in tensor order. */
  inline: Schema.optional(Bytes),
  /** The tensors that travel packed in blocks, ahead of the others: a byte per tensor, 1 where packed (packing.ts). */
  packed: Schema.optional(Bytes),
  /** Opaque transport metadata produced on the producer (e.g. registration descriptors). */
  metadata: Schema.optional(Schema.Unknown),
  refs: Schema.Array(Id),
  /** Set by the owner for a two-sided transfer to one consumer: the group and the producer's rank in it. */
  route: Schema.optional(Schema.Struct({ group: GroupName, rank: Schema.Number })),
})
export type ObjectInfo = typeof ObjectInfo.Type

export const TransferStat = Schema.Struct({
  objectId: Id,
  transport: Schema.String,
  from: Id,
  to: Id,
  bytes: Schema.Finite,
  /** When the receive started, in ms since the epoch (performance.timeOrigin + performance.now()). */
  startedAt: Schema.Finite,
  ms: Schema.Finite,
})
export type TransferStat = typeof TransferStat.Type

export const GroupSetup = Schema.Struct({
  /**
   * The driver's number for the group: one destroyed and made again under its name is another group,
   * whose all-gather rounds a late blob of the old one must not join.
   */
  id: Schema.Number,
  name: GroupName,
  backend: Schema.String,
  rank: Schema.Number,
  worldSize: Schema.Number,
  members: Schema.Array(Id),
  timeoutMs: Schema.Number,
})
export type GroupSetup = typeof GroupSetup.Type

/**
 * One member's blob for a round of its group's all-gather, to the driver: from its agent while its
 * transport creates the group (the rendezvous), from its main thread for `group(name).allGather`.
 */
const AllGather = Schema.TaggedStruct("AllGather", { reqId: Schema.Number, group: GroupName, groupId: Schema.Number, blob: Bytes, timeoutMs: Schema.Number })
export type AllGather = typeof AllGather.Type

/** The driver's answer to an AllGather: every member's blob of the round, by rank, or why the round failed. */
const AllGathered = Schema.TaggedStruct("AllGathered", { reqId: Schema.Number, blobs: Schema.optional(Schema.Array(Bytes)), error: Schema.optional(WireError) })
export type AllGathered = typeof AllGathered.Type

// Driver -> actor main thread.
export const ToActor = Schema.Union([
  Schema.TaggedStruct("Init", {
    actorId: Id,
    index: Schema.Number,
    moduleUrl: Schema.String,
    exportName: Schema.String,
    transports: Schema.Array(Schema.String),
    clusterDir: Schema.String,
    /** The cluster's random id, which every ref this actor makes carries. */
    clusterId: Schema.String,
    maxConcurrency: Schema.Number,
    transferTimeoutMs: Schema.Number,
  }),
  Schema.TaggedStruct("Call", {
    callId: Schema.Number,
    method: Schema.String,
    returnId: Id,
    transport: Schema.optional(Schema.String),
    /** The arguments with refs and tensors replaced by placeholders. */
    args: Bytes,
    /** Tensors passed by value: their bytes are the frame's body, in this order. */
    argTensors: TensorMetas,
    /** One entry per distinct ref among the arguments. */
    refs: Schema.Array(ObjectInfo),
    /** Objects to free first, as a Free message would. */
    frees: Schema.optional(Schema.Array(Id)),
  }),
  Schema.TaggedStruct("Free", { objectIds: Schema.Array(Id) }),
  /** cluster.cancel: a queued call is dropped, a running one's signal aborts. */
  Schema.TaggedStruct("Cancel", { callId: Schema.Number }),
  Schema.TaggedStruct("Resolved", {
    reqId: Schema.Number,
    info: Schema.optional(ObjectInfo),
    error: Schema.optional(WireError),
  }),
  Schema.TaggedStruct("PutAck", { reqId: Schema.Number, error: Schema.optional(WireError) }),
  Schema.TaggedStruct("Inspect", { reqId: Schema.Number }),
  /** Receive an object ahead of the calls that use it and keep it until it is freed (cluster.broadcast). */
  Schema.TaggedStruct("Prefetch", { reqId: Schema.Number, info: ObjectInfo, collective: Schema.Boolean }),
  AllGathered,
  /** Another process died: end the transfers this main thread runs with it. */
  Schema.TaggedStruct("PeerDied", { peer: Id }),
  Schema.TaggedStruct("Shutdown", {}),
])
export type ToActor = typeof ToActor.Type

export const ActorInspection = Schema.Struct({
  primary: Schema.Array(Id),
  received: Schema.Array(Id),
  pendingTransfers: Schema.Array(Schema.String),
  registrations: Schema.Array(Schema.String),
  groups: Schema.Array(Schema.String),
})
export type ActorInspection = typeof ActorInspection.Type

// Actor main thread -> driver.
export const FromActor = Schema.Union([
  Schema.TaggedStruct("Ready", { agentAddress: Schema.String, pid: Schema.Number }),
  Schema.TaggedStruct("InitFailed", { error: WireError }),
  Schema.TaggedStruct("Result", {
    callId: Schema.Number,
    info: Schema.optional(ObjectInfo),
    error: Schema.optional(WireError),
    transfers: Schema.Array(TransferStat),
  }).check(Schema.makeFilter((result) => (result.info === undefined) !== (result.error === undefined), { expected: "a result with either info or an error" })),
  Schema.TaggedStruct("Put", { reqId: Schema.Number, info: ObjectInfo }),
  Schema.TaggedStruct("Resolve", { reqId: Schema.Number, objectId: Id, timeoutMs: Schema.optional(Schema.Number) }),
  Schema.TaggedStruct("AddRefs", { objectIds: Schema.Array(Id) }),
  Schema.TaggedStruct("DropRefs", { objectIds: Schema.Array(Id) }),
  Schema.TaggedStruct("Inspection", { reqId: Schema.Number, inspection: ActorInspection }),
  Schema.TaggedStruct("Prefetched", { reqId: Schema.Number, error: Schema.optional(WireError), transfers: Schema.Array(TransferStat) }),
  AllGather,
])
export type FromActor = typeof FromActor.Type

/**
 * The largest request an agent accepts: requests name objects, groups and peers, and the biggest, a
 * group's gathered transport addresses, stays far below this. A connection that announces more is
 * dropped before anything is buffered for it.
 */
export const MAX_AGENT_REQUEST_BYTES = 1024 * 1024

// To an agent, from peer agents and the driver: requests carry a reqId, replies echo it.
export const AgentRequest = Schema.Union([
  Schema.TaggedStruct("Fetch", { reqId: Schema.Number, objectId: Id }),
  Schema.TaggedStruct("Send", {
    reqId: Schema.Number,
    objectId: Id,
    transport: Schema.String,
    group: GroupName,
    to: Id,
    toRank: Schema.Number,
    timeoutMs: Schema.Number,
    /**
     * Asked for before the object exists (its consumer's call was submitted while the producer's
     * method ran): the send waits for the object's registration instead of failing, then starts.
     */
    whenRegistered: Schema.optional(Schema.Boolean),
  }),
  /** The owner gave up on a send it asked for (its consumer's call was never sent, or its object holds no tensor). */
  Schema.TaggedStruct("CancelSend", { reqId: Schema.Number, objectId: Id, transport: Schema.String, to: Id }),
  Schema.TaggedStruct("GroupCreate", { reqId: Schema.Number, setup: GroupSetup }),
  Schema.TaggedStruct("GroupDestroy", { reqId: Schema.Number, name: GroupName, backend: Schema.String }),
  AllGathered,
  Schema.TaggedStruct("PeerDied", { reqId: Schema.Number, peer: Id }),
  /** The root's half of a collective broadcast of an object to the whole group. */
  Schema.TaggedStruct("Broadcast", { reqId: Schema.Number, objectId: Id, group: GroupName, root: Schema.Number, timeoutMs: Schema.Number }),
])
export type AgentRequest = typeof AgentRequest.Type

// From an agent over a connection made to it: replies, and (to the driver) its blobs of a group's rendezvous.
export const AgentReply = Schema.Union([
  Schema.TaggedStruct("Data", { reqId: Schema.Number, tensors: TensorMetas }),
  Schema.TaggedStruct("Done", { reqId: Schema.Number }),
  Schema.TaggedStruct("Failed", { reqId: Schema.Number, error: WireError }),
  AllGather,
])
export type AgentReply = typeof AgentReply.Type

/** What a host's node reports of its host. */
export const HostInfo = Schema.Struct({
  name: Schema.String,
  address: Schema.String,
  cpus: Schema.Number,
  memoryBytes: Schema.Number,
  gpus: Schema.Number,
  /** The transport packages installed on the host, beside the object store. */
  transports: Schema.Array(Schema.String),
})
export type HostInfo = typeof HostInfo.Type

/**
 * The largest message to a node: a spawn names a module, flags and the actor's environment. The
 * node's channels are mutually authenticated, but a driver's bug must not make a node buffer much.
 */
export const MAX_NODE_REQUEST_BYTES = 256 * 1024

/**
 * A driver's admission on a node is a lease: the node ends the driver's actors once it has not been
 * renewed (or granted) for DRIVER_LEASE_MS, so that a driver cut off but alive loses them within
 * 10 s. The driver renews each of its admissions every LEASE_RENEW_MS, each renewal within
 * LEASE_RENEW_MS.
 */
export const DRIVER_LEASE_MS = 6_000
export const LEASE_RENEW_MS = 1_000

/**
 * The form of the messages between a cluster's processes. A host's actors run its node's tensorlane
 * and speak with the driver's: a node refuses the spawns of a driver whose protocol is another, and
 * a driver the placement on such a node (Admit's answer carries it). Raised with any change to a
 * message's form (2: tensor metadata as bytes, wireMetas.ts); test/ProtocolVersion.test.ts fails on
 * a schema changed without it. What carries the refusal keeps its
 * form in every release: a Spawn's `_tag` and `protocol`, InitFailed and WireError.
 */
export const PROTOCOL_VERSION = 2

// Driver -> a host's node: each actor has a connection of its own, whose first message is its Spawn
// and which then carries its control connection's bytes (ToActor / FromActor) through the node. A
// Renew has a connection of its own too, answered by one LeaseRenewal. The rest (admitting a
// driver, ending its actors, describing the host) goes through Effect's cluster engine (engine.ts),
// which routes nothing to a node while Postgres is down: renewals go to the node directly, so that
// an outage ends no lease.
export const ToNode = Schema.Union([
  Schema.TaggedStruct("Spawn", {
    /** The driver's PROTOCOL_VERSION; absent from the spawns of releases before it. */
    protocol: Schema.optional(Schema.Number),
    clusterId: Schema.String,
    actorId: Id,
    moduleUrl: Schema.String,
    execArgv: Schema.Array(Schema.String),
    env: Schema.Record(Schema.String, Schema.String),
  }),
  Schema.TaggedStruct("Renew", { clusterId: Schema.String }),
])
export type ToNode = typeof ToNode.Type

/** A node's answer to a Renew: whether it still held the driver's admission (and renewed it). */
export const LeaseRenewal = Schema.TaggedStruct("LeaseRenewal", { held: Schema.Boolean })
export type LeaseRenewal = typeof LeaseRenewal.Type

const decoder = <S extends Schema.Top>(schema: S, what: string) => {
  const decode = Schema.decodeUnknownSync(schema as any)
  return (input: unknown): S["Type"] => {
    try {
      return decode(input) as S["Type"]
    } catch (cause) {
      throw new ProtocolError({ message: `malformed ${what}: ${String(cause instanceof Error ? cause.message : cause)}` })
    }
  }
}

export const decodeToActor = decoder(ToActor, "message to an actor")
export const decodeFromActor = decoder(FromActor, "message from an actor")
export const decodeAgentRequest = decoder(AgentRequest, "agent request")
export const decodeAgentReply = decoder(AgentReply, "agent reply")
export const decodeObjectInfo = decoder(ObjectInfo, "object info")
export const decodeToNode = decoder(ToNode, "message to a node")
export const decodeLeaseRenewal = decoder(LeaseRenewal, "lease renewal")
