/**
 * A tensorlane transport plugin, one-sided over TCP on 127.0.0.1. The producer's transfer agent
 * serves the bytes of the objects it holds; a consumer connects, names an object and reads its
 * tensors straight into the receive buffers. Every process of a cluster imports this module (by the
 * name given to `start({ transports })`) and runs it in its transfer agent.
 */
import * as net from "node:net"
import { defineTransport } from "@tensorlane/core/plugin"

/** The tensors of the objects this process serves, by object id. */
const served = new Map()
/** Started by the first object produced: most processes only consume. */
let listening

// Protocol: the consumer writes the object id and "\n"; the producer writes the object's tensor
// bytes, in order, and closes. An unknown id gets the connection closed at once.
const serve = (socket) => {
  let request = ""
  socket.on("error", () => socket.destroy())
  socket.on("data", (chunk) => {
    request += chunk.toString("latin1")
    const end = request.indexOf("\n")
    if (end < 0) return
    socket.removeAllListeners("data")
    const tensors = served.get(request.slice(0, end)) ?? []
    for (const tensor of tensors) socket.write(tensor.contiguousBytes())
    socket.end()
  })
}

const start = () =>
  (listening ??= new Promise((resolve, reject) => {
    const server = net.createServer(serve)
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve(server))
  }))

/** Writes the bytes arriving on `socket` into `into`, tensor after tensor; resolves once all arrived. */
const readInto = (socket, into) =>
  new Promise((resolve, reject) => {
    let index = 0 // the tensor being filled
    let offset = 0 // bytes of it already written
    const nextIfFull = () => {
      while (index < into.length && offset === into[index].nbytes) {
        index += 1
        offset = 0
      }
    }
    nextIfFull()
    socket.on("data", (chunk) => {
      for (let at = 0; at < chunk.byteLength; ) {
        if (index === into.length) return socket.destroy(new Error("the producer sent more bytes than the tensors hold"))
        const t = into[index]
        const n = Math.min(t.nbytes - offset, chunk.byteLength - at)
        t.storage.bytes.set(chunk.subarray(at, at + n), t.byteOffset + offset)
        at += n
        offset += n
        nextIfFull()
      }
    })
    socket.on("end", () => (index === into.length ? resolve() : reject(new Error("the producer closed before sending every tensor"))))
    socket.on("error", reject)
  })

export const tcp = defineTransport({
  name: "tcp",
  capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true },
  extractMetadata: async ({ objectId, tensors }) => {
    const server = await start()
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
      socket.write(`${metadata.objectId}\n`)
      await readInto(socket, into)
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
