/**
 * The driver's connections to the actors' transfer agents, opened on first use, and its requests over
 * them: sends, broadcasts, group creation and destruction. An agent that creates a group also sends
 * the driver its blobs of the group's rendezvous over the same connection.
 */
import { type Connection, type TlsClient, connect } from "../connection.js"
import { type AgentReply, type AgentRequest, type AllGather, type AllGathered, MAX_AGENT_REQUEST_BYTES, decodeAgentReply } from "../messages.js"
import { Requests } from "../requests.js"
import type { ActorRecord } from "./ActorProcesses.js"

/** A request as its sender writes it: the id is this module's to give. */
export type Unsent<T> = T extends unknown ? Omit<T, "reqId"> : never

export class AgentLinks {
  private readonly connections = new Map<string, Promise<Connection>>()
  private readonly requests = new Requests<AgentReply>()

  constructor(
    /** An agent's blob for a round of its group's all-gather; `reply` answers it over the same connection. */
    private readonly onAllGather: (record: ActorRecord, message: AllGather, reply: (answer: AllGathered) => void) => void,
    /** The driver's credentials in a cluster across hosts, whose actors' agents listen under mutual TLS. */
    private readonly tlsClient: TlsClient | undefined,
  ) {}

  private connection(record: ActorRecord): Promise<Connection> {
    let connection = this.connections.get(record.id)
    if (connection === undefined) {
      connection = connect(record.agentAddress, {
        peerMaxHeaderBytes: MAX_AGENT_REQUEST_BYTES,
        // An agent's replies to the driver never carry a body: a peer cannot make the driver buffer one.
        maxBodyBytes: 0,
        onFrame: (frame, opened) => {
          let reply: AgentReply
          try {
            reply = decodeAgentReply(frame.header)
          } catch {
            return
          }
          if (reply._tag === "AllGather") this.onAllGather(record, reply, (answer) => opened.send(answer))
          else this.requests.answer(reply.reqId, reply._tag === "Failed" ? reply.error : undefined, reply, { actor: record.id, method: "agent" }, record.id)
        },
        onClose: () => {
          this.connections.delete(record.id)
        },
      }, this.tlsClient)
      this.connections.set(record.id, connection)
    }
    return connection
  }

  /** A request to an actor's agent, answered by its reply (a Failed one rejects); an actor's death fails it. */
  async request(record: ActorRecord, request: Unsent<AgentRequest>): Promise<AgentReply> {
    const connection = await this.connection(record)
    return this.requests.request((reqId) => connection.send({ ...request, reqId }), { peer: record.id })
  }

  /** A request whose reply nobody waits for. */
  async post(record: ActorRecord, request: Unsent<AgentRequest>): Promise<void> {
    const connection = await this.connection(record)
    // Id 0 is never handed out: a reply to it is dropped.
    connection.send({ ...request, reqId: 0 })
  }

  /** Whether the driver has a connection to (or is connecting to) the actor's agent. */
  connected(record: ActorRecord): boolean {
    return this.connections.has(record.id)
  }

  /** Fails the requests to a dead actor's agent. */
  actorDied(record: ActorRecord, died: Error): void {
    this.requests.failPeer(record.id, died)
  }
}
