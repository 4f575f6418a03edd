/**
 * A driver's leases on the hosts' nodes, renewed from a worker thread of its own (leaseMain.ts), so
 * that a driver whose main thread is busy (a synchronous load, a long CPU-bound loop) keeps its
 * actors: renewals stop only when the process dies or is cut off. The main thread (Hosts) says which
 * hosts to hold a lease on, and hears when one is lost.
 */
import type { ClusterHost, ClusterTls } from "../../ClusterConfig.js"
import { Connection, decoded, openSocket, tlsAddress } from "../connection.js"
import { DRIVER_LEASE_MS, LEASE_RENEW_MS, type ToNode, decodeLeaseRenewal } from "../messages.js"

/** A LeaseRenewal is a tag and a boolean. */
const MAX_RENEWAL_BYTES = 256

export const nodeAddress = (host: ClusterHost): string => tlsAddress({ member: host.name, host: host.address, port: host.port })

/** What the main thread gives the lease worker when it starts it. */
export interface LeaseWorkerData {
  /** The cluster config's file, and the driver's name there (its certificate). */
  readonly config: string
  readonly driver: string
  readonly clusterId: string
}

/** A placement admitted the driver on `hold`: a lease granted now, which replaces the host's one before. */
export interface LeaseCommand {
  readonly hold: string
  /** Told back with its loss, so that the main thread can tell a lease lost from the one that replaced it. */
  readonly placement: number
}

/** The node of host `lost` has ended, or is ending, this driver's actors. */
export interface LeaseEvent {
  readonly lost: string
  readonly placement: number
  readonly reason: string
}

/** This driver's admission on a host's node: when the node last granted or renewed it, as far as the driver knows. */
interface Lease {
  readonly placement: number
  heldAt: number
  renewing: boolean
}

export class Leases {
  /** By host name; a placement replaces a host's lease, so that a renewal answered for the one before changes nothing. */
  private readonly leases = new Map<string, Lease>()

  constructor(
    private readonly credentials: ClusterTls,
    private readonly clusterId: string,
    /** A host's node address under mutual TLS. */
    private readonly nodeAddress: (host: string) => string,
    private readonly lost: (event: LeaseEvent) => void,
  ) {
    // Referenced: it is what keeps the worker alive (its parent does not wait for it).
    setInterval(() => this.renewLeases(), LEASE_RENEW_MS)
  }

  hold(command: LeaseCommand): void {
    this.leases.set(command.hold, { placement: command.placement, heldAt: performance.now(), renewing: false })
  }

  /**
   * Renews every lease this driver holds (one renewal at a time per host; a failed one is let be:
   * the node decides), and reports the loss of a lease the node no longer holds, or which has not
   * been renewed for DRIVER_LEASE_MS: its node has ended the driver's actors there.
   */
  private renewLeases(): void {
    const now = performance.now()
    for (const [name, lease] of [...this.leases]) {
      if (now - lease.heldAt >= DRIVER_LEASE_MS) {
        this.leaseLost(name, lease, `this driver's lease on node ${name} was not renewed for ${DRIVER_LEASE_MS} ms: the node ends this driver's actors there`)
      } else if (!lease.renewing) {
        this.renew(name, lease)
      }
    }
  }

  private renew(name: string, lease: Lease): void {
    lease.renewing = true
    const timeout = setTimeout(() => connection.close(), LEASE_RENEW_MS)
    const connection = new Connection(openSocket(this.nodeAddress(name), this.credentials.client).socket, {
      onFrame: decoded(decodeLeaseRenewal, (renewal, _frame, c) => {
        c.close()
        if (this.leases.get(name) !== lease) return
        if (renewal.held) lease.heldAt = performance.now()
        else this.leaseLost(name, lease, `node ${name} no longer holds this driver's lease: it ran out, or the node restarted`)
      }),
      onClose: () => {
        clearTimeout(timeout)
        lease.renewing = false
      },
      maxBodyBytes: 0,
      maxHeaderBytes: MAX_RENEWAL_BYTES,
    })
    connection.send({ _tag: "Renew", clusterId: this.clusterId } satisfies ToNode)
  }

  private leaseLost(name: string, lease: Lease, reason: string): void {
    this.leases.delete(name)
    this.lost({ lost: name, placement: lease.placement, reason })
  }
}
