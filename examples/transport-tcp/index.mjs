/**
 * A tensorlane transport plugin written with Promises, one-sided over TCP on 127.0.0.1. The
 * producer's transfer agent serves the bytes of the objects it holds; a consumer connects, names an
 * object and reads its tensors straight into the receive buffers (protocol.mjs). Every process of a
 * cluster imports this module (by the name given to `start({ transports })`) and runs it in its
 * transfer agent.
 */
import * as net from "node:net"
import { defineTransport } from "@tensorlane/core/plugin"
import { listen, request } from "./protocol.mjs"

/** The tensors of the objects this process serves, by object id. */
const served = new Map()
/** Started by the first object produced: most processes only consume. */
let listening

export const tcp = defineTransport({
  name: "tcp",
  capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true },
  extractMetadata: async ({ objectId, tensors }) => {
    const server = await (listening ??= listen(served))
    served.set(objectId, tensors)
    return { port: server.address().port, objectId }
  },
  fetch: async ({ metadata, into, signal }) => {
    signal.throwIfAborted()
    const socket = net.connect({ host: "127.0.0.1", port: metadata.port })
    // A timeout or a dead peer aborts the transfer: the socket goes, and the read fails.
    const abort = () => socket.destroy(signal.reason)
    signal.addEventListener("abort", abort, { once: true })
    try {
      await request(socket, metadata.objectId, into)
    } finally {
      signal.removeEventListener("abort", abort)
      socket.destroy()
    }
  },
  release: ({ objectId }) => {
    served.delete(objectId)
  },
  inspect: () => ({ registrations: [...served.keys()] }),
  close: async () => {
    if (listening !== undefined) (await listening).close()
  },
})

export default tcp
