/**
 * The consumer's half of moving one object, on whichever thread runs it: the transfer agent, or the
 * consuming thread itself for transports that work on any thread.
 */
import { MissingGroupError, UnsupportedOperationError } from "../Errors.js"
import type { Tensor } from "../Tensor.js"
import type { PromiseTransport } from "../Transport.js"
import type { ObjectInfo } from "./messages.js"
import { transferLabel } from "./pendingTransfers.js"
import { checkReceived } from "./tensorMeta.js"
import type { TensorMeta } from "./wireMetas.js"

export interface ReceiveObject {
  readonly info: ObjectInfo
  /** What travels, read from `info`: its packed blocks first, then its other tensors (packing.ts). */
  readonly tensors: ReadonlyArray<TensorMeta>
  /** The transport to receive with: the object's own, or object-store for a copy through the control plane. */
  readonly via: string
  readonly into: ReadonlyArray<Tensor>
  readonly consumer: string
  /** Receive as a non-root member of a collective broadcast of the object to its whole group. */
  readonly collective: boolean
  /** Whether this thread knows the group; absent where the transport itself keeps track of its groups. */
  readonly hasGroup?: (group: string) => boolean
  /** Hears what the transport may write after its promise settled (`BufferUse`). */
  readonly writesUntil: (done: Promise<unknown>) => void
}

export const receiveLabel = ({ via, info, consumer }: Pick<ReceiveObject, "via" | "info" | "consumer">): string =>
  transferLabel(via, info.objectId, info.producer, consumer)

export const receiveObject = async (transport: PromiseTransport, request: ReceiveObject, signal: AbortSignal): Promise<void> => {
  const { info, tensors, via, into, writesUntil } = request
  const peers = { objectId: info.objectId, producer: info.producer, producerAddress: info.producerAddress, consumer: request.consumer }
  if (transport.capabilities.oneSided) {
    await transport.fetch!({ ...peers, tensors, metadata: info.metadata, into, signal, writesUntil })
  } else {
    const route = info.route
    if (route === undefined || request.hasGroup?.(route.group) === false) {
      throw new MissingGroupError({
        message: `no ${via} group joins ${info.producer} and ${request.consumer}; create one with cluster.createCollectiveGroup`,
        backend: via,
      })
    }
    if (request.collective) {
      if (transport.broadcast === undefined) throw new UnsupportedOperationError({ message: `transport "${via}" has no broadcast` })
      await transport.broadcast({ group: route.group, tensors: into, root: route.rank, signal, writesUntil })
    } else {
      await transport.receive!({ ...peers, group: route.group, fromRank: route.rank, tensors, metadata: info.metadata, into, signal, writesUntil })
    }
  }
  checkReceived(tensors, into)
}
