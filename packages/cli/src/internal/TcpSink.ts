/** Forked by the TCP limit: receives fixed-size messages on the address it is given and acknowledges each with one byte. */
import * as net from "node:net"

const size = Number(process.argv[2])
const host = process.argv[3]!
const server = net.createServer((socket) => {
  let received = 0
  socket.on("data", (chunk) => {
    received += chunk.byteLength
    while (received >= size) {
      received -= size
      socket.write(Buffer.from([1]))
    }
  })
})
server.listen(0, host, () => {
  const address = server.address()
  if (address !== null && typeof address === "object") process.send?.(address.port)
})
process.on("disconnect", () => process.exit(0))
