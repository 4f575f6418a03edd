/**
 * The wire protocol of the worked example transports, shared by the one written with Promises
 * (index.mjs) and the one written in Effect (effect.mjs): the consumer writes the object id and
 * "\n"; the producer writes the object's tensor bytes, in order, and closes. An unknown id gets the
 * connection closed at once.
 */
import * as net from "node:net"

/** Serves the tensors of `served` (object id -> tensors) on 127.0.0.1; resolves with the listening server. */
export const listen = (served) =>
  new Promise((resolve, reject) => {
    const server = net.createServer((socket) => serve(socket, served))
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve(server))
  })

const serve = (socket, served) => {
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

/** Names an object on `socket`, connected to its producer; its bytes go into `into`, tensor after tensor; resolves once all arrived. */
export const request = (socket, objectId, into) =>
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
    socket.write(`${objectId}\n`)
  })
