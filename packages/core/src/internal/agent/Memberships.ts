/**
 * The collective groups this process is a member of, kept by its transfer agent: each created by its
 * transport when the driver asks (the transport's rendezvous is a round of the group's all-gather,
 * answered by the driver over the connection that asked), destroyed when the driver asks, and
 * reported to the process's main thread, which runs `group(name)` on them.
 */
import { TransferError } from "../../Errors.js"
import type { PromiseTransport } from "../../Transport.js"
import type { Connection } from "../connection.js"
import type { AgentReply, AllGathered, GroupSetup } from "../messages.js"
import { Requests } from "../requests.js"

/** A group as its member's main thread knows it. */
export interface Membership {
  readonly id: number
  readonly name: string
  readonly backend: string
  readonly rank: number
  readonly worldSize: number
}

/** What the agent tells its main thread unasked: the groups the process is a member of, whenever they change. */
export type AgentEvent = { readonly event: "groups"; readonly groups: ReadonlyArray<Membership> }

export class Memberships {
  private readonly groups = new Map<string, GroupSetup>()
  /** Groups being created, and whether their owner destroyed them meanwhile (then they go once made). */
  private readonly creating = new Map<string, { abandoned: boolean }>()
  /** Rounds of the rendezvous of groups being created, each waiting for the driver's answer. */
  private readonly gathers = new Requests<ReadonlyArray<Uint8Array>>()

  constructor(
    private readonly transport: (name: string) => PromiseTransport,
    private readonly emit: (event: AgentEvent) => void,
  ) {}

  get(name: string): GroupSetup | undefined {
    return this.groups.get(name)
  }

  has(name: string): boolean {
    return this.groups.has(name)
  }

  names(): Array<string> {
    return [...this.groups.keys()]
  }

  /** This member's side of a new group, made by its transport; `driver` is the connection that asked. */
  async create(setup: GroupSetup, driver: Connection): Promise<void> {
    const transport = this.transport(setup.backend)
    const creation = { abandoned: false }
    this.creating.set(setup.name, creation)
    try {
      await transport.createGroup!({
        ...setup,
        allGather: (blob) =>
          this.gathers.request(
            (reqId) => driver.send({ _tag: "AllGather", reqId, group: setup.name, groupId: setup.id, blob, timeoutMs: setup.timeoutMs } satisfies AgentReply),
            { peer: driver },
          ),
      })
    } finally {
      this.creating.delete(setup.name)
    }
    // Destroyed while its transport was still connecting it (past the rendezvous): nobody else will.
    if (creation.abandoned) {
      await transport.destroyGroup?.(setup.name)
      throw new TransferError({ message: `creating group "${setup.name}" was abandoned`, transport: setup.backend })
    }
    this.groups.set(setup.name, setup)
    this.emitGroups()
  }

  /**
   * The owner destroyed a group. A creation still under way is abandoned: one in its rendezvous fails
   * by the driver's answer, one past it is destroyed once made.
   */
  async destroy(name: string): Promise<void> {
    const creation = this.creating.get(name)
    if (creation !== undefined) creation.abandoned = true
    const group = this.groups.get(name)
    this.groups.delete(name)
    this.emitGroups()
    if (group !== undefined) await this.transport(group.backend).destroyGroup?.(name)
  }

  /** The driver's answer to a round of a rendezvous, on the connection that asked for the group. */
  gathered(message: AllGathered, connection: Connection): void {
    this.gathers.answer(message.reqId, message.error, message.blobs ?? [], { actor: "driver", method: "allGather" }, connection)
  }

  /** A connection closed: the rounds it was to answer fail. */
  connectionClosed(connection: Connection): void {
    this.gathers.failPeer(connection, new TransferError({ message: "the driver's connection closed during a group's rendezvous", transport: "control" }))
  }

  private emitGroups(): void {
    this.emit({
      event: "groups",
      groups: [...this.groups.values()].map((g) => ({ id: g.id, name: g.name, backend: g.backend, rank: g.rank, worldSize: g.worldSize })),
    })
  }
}
