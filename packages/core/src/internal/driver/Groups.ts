/**
 * Collective groups, as the driver keeps them: creating one (every member's agent has its transport
 * join, after a rendezvous in which the members exchange what their transport needs), finding the
 * group that routes a transfer, destroying one, and the all-gather of a group's members. The
 * rendezvous of a creation and every `group(name).allGather` after it are rounds of one all-gather,
 * run here: each member sends its blob to the driver, which answers every member once all came.
 */
import { GroupConflictError, InvalidArgumentError, MissingGroupError, TimeoutError, UnsupportedOperationError } from "../../Errors.js"
import { checkTimeout, describe } from "../arguments.js"
import { GatherRounds, type GatherReply } from "../gatherRounds.js"
import type { AllGather, AllGathered } from "../messages.js"
import { unknownTransport } from "../transportRegistry.js"
import { firstFailure, settledWithin } from "../waits.js"
import { toWireError } from "../wireError.js"
import type { ActorProcesses, ActorRecord } from "./ActorProcesses.js"
import type { AgentLinks } from "./AgentLinks.js"
import type { DriverContext } from "./DriverContext.js"

export interface GroupOptions {
  readonly backend: string
  readonly name?: string
  readonly timeoutMs?: number
}

export interface CollectiveGroup {
  readonly name: string
  readonly backend: string
  /** Actor ids, by rank. */
  readonly members: ReadonlyArray<string>
  destroy(): Promise<void>
}

export interface GroupRecord {
  /** Unique in the cluster: a name is free again once its group is destroyed. */
  readonly id: number
  readonly name: string
  readonly backend: string
  readonly members: ReadonlyArray<string>
  readonly gathers: GatherRounds
  /** How long its creation, and its destruction, wait for the members. */
  readonly timeoutMs: number
}

export class Groups {
  private readonly groups = new Map<string, GroupRecord>()
  private nextId = 1
  /** The number in the next default name (`<backend>-<n>`). */
  private nextName = 1

  constructor(
    private readonly driver: DriverContext,
    private readonly processes: ActorProcesses,
    private readonly agents: AgentLinks,
  ) {}

  /** A group of `backend` that holds every one of `members`. */
  groupOf(backend: string, ...members: ReadonlyArray<string>): GroupRecord | undefined {
    for (const group of this.groups.values()) {
      if (group.backend === backend && members.every((id) => group.members.includes(id))) return group
    }
    return undefined
  }

  /** Whether the group of that name still exists. */
  has(name: string): boolean {
    return this.groups.has(name)
  }

  list(): ReadonlyArray<{ name: string; backend: string; members: ReadonlyArray<string> }> {
    return [...this.groups.values()].map(({ name, backend, members }) => ({ name, backend, members }))
  }

  names(): Array<string> {
    return [...this.groups.keys()]
  }

  async create(actors: ReadonlyArray<{ actorId: string }>, options: GroupOptions): Promise<CollectiveGroup> {
    if (!Array.isArray(actors) || actors.length === 0) {
      throw new InvalidArgumentError({ message: `createCollectiveGroup takes a non-empty array of actor handles, not ${describe(actors)}`, argument: "actors" })
    }
    if (typeof options?.backend !== "string") {
      throw new InvalidArgumentError({ message: `createCollectiveGroup needs { backend }, the name of a transport, not ${describe(options?.backend)}`, argument: "backend" })
    }
    const timeoutMs = checkTimeout(options.timeoutMs, "timeoutMs") ?? this.driver.transferTimeoutMs
    if (options.name !== undefined && (typeof options.name !== "string" || !/^[^\0]{1,256}$/u.test(options.name))) {
      throw new InvalidArgumentError({
        message: `a group's name must be a string of 1 to 256 characters without NUL, not ${describe(options.name)}`,
        argument: "name",
      })
    }
    const backend = options.backend.toLowerCase()
    const transports = this.driver.runtime.transports
    const transport = transports.get(backend)
    if (transport === undefined) throw unknownTransport(backend, transports.keys())
    if (transport.createGroup === undefined) {
      throw new UnsupportedOperationError({ message: `transport "${backend}" has no collective groups` })
    }
    const records = actors.map((a) => this.processes.actorOf(a))
    const members = records.map((r) => r.id)
    this.processes.requireSameHost(backend, members)
    const twice = members.find((m, i) => members.indexOf(m) !== i)
    if (twice !== undefined) throw new GroupConflictError({ message: `${twice} is listed twice: list each actor of a group once`, backend })
    const name = options.name ?? `${backend}-${this.nextName++}`
    if (this.groups.has(name)) {
      throw new GroupConflictError({ message: `a group named "${name}" exists: choose another name, or destroy that group first`, backend })
    }
    for (let i = 0; i < members.length; i++) {
      for (let j = i + 1; j < members.length; j++) {
        const existing = this.groupOf(backend, members[i], members[j])
        if (existing !== undefined) {
          throw new GroupConflictError({
            message: `${members[i]} and ${members[j]} already share the ${backend} group "${existing.name}"; a pair of actors shares at most one group per backend (destroy it first)`,
            backend,
          })
        }
      }
    }
    const group: GroupRecord = { id: this.nextId++, name, backend, members, gathers: new GatherRounds(name, members.length), timeoutMs }
    this.groups.set(name, group)
    const creations = records.map((r, rank) =>
      this.agents.request(r, { _tag: "GroupCreate", setup: { id: group.id, name, backend, rank, worldSize: members.length, members, timeoutMs } }),
    )
    // The first failure ends the creation: the other members would wait in the rendezvous for ever.
    const failure = await firstFailure(creations, timeoutMs, () => new TimeoutError({ message: `creating the ${backend} group "${name}" took over ${timeoutMs} ms`, timeoutMs }))
    if (failure !== undefined) {
      // Members that are stuck (stopped, or blocked in a native connect) must not hold up the failure.
      void this.destroy(group)
      throw failure
    }
    return { name, backend, members, destroy: () => this.destroy(group) }
  }

  private async destroy(group: GroupRecord): Promise<void> {
    if (this.groups.get(group.name) !== group) return
    this.groups.delete(group.name)
    group.gathers.breakAll(new MissingGroupError({ message: `the ${group.backend} group "${group.name}" was destroyed`, backend: group.backend }))
    // A member that does not answer (stopped, stuck in its transport) holds the destroy up for the group's timeout at most.
    await settledWithin(
      group.members
        .map((id) => this.processes.get(id))
        .filter((r): r is ActorRecord => r !== undefined && r.alive)
        .map((r) => this.agents.request(r, { _tag: "GroupDestroy", name: group.name, backend: group.backend })),
      group.timeoutMs,
    )
  }

  /** A member's blob for the next round of its group's all-gather; `send` carries the round's answer back to it. */
  gather(member: string, message: AllGather, send: (answer: AllGathered) => void): void {
    const answer = (r: GatherReply) =>
      send({
        _tag: "AllGathered",
        reqId: message.reqId,
        ...(r.blobs ? { blobs: r.blobs as Array<Uint8Array> } : {}),
        ...(r.error ? { error: toWireError(r.error) } : {}),
      })
    const reply = (r: GatherReply) => {
      try {
        answer(r)
      } catch (error) {
        // Every member's blob together is more than a message carries (MessageTooLargeError): the round fails.
        answer({ error: error as Error })
      }
    }
    const group = this.groups.get(message.group)
    const rank = group?.members.indexOf(member) ?? -1
    if (group === undefined || rank < 0) {
      reply({ error: new MissingGroupError({ message: `${member} is in no group named "${message.group}"`, backend: group?.backend ?? "" }) })
    } else if (group.id !== message.groupId) {
      const gone = `the ${group.backend} group "${group.name}" that ${member} gathers in was destroyed (the group of that name now is another)`
      reply({ error: new MissingGroupError({ message: gone, backend: group.backend }) })
    } else {
      group.gathers.contribute(rank, message.blob, message.timeoutMs, reply)
    }
  }

  /** Fails the rounds of every group of a dead member, and every later one. */
  memberDied(actorId: string, died: Error): void {
    for (const group of this.groups.values()) if (group.members.includes(actorId)) group.gathers.breakAll(died)
  }
}
