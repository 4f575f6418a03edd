/** Forked by raw Gloo (../RawGloo.ts): receives each send it is told of into its buffer of that size, and acknowledges it. */
import { type RawGlooMessage, connectPair } from "../RawGloo.js"
import { HOUR_MS, buffersBySize, linkOf, patternByte, touched } from "./PeerLink.js"

const link = linkOf<RawGlooMessage>(process)
const group = await connectPair(1, link)
const ack = new Uint8Array(new SharedArrayBuffer(1))
const into = buffersBySize(touched)
for (;;) {
  const message = await link.next()
  if ("done" in message || !("tag" in message)) break
  const { tag, bytes } = message
  const buffer = into(bytes)
  link.send({ ready: true })
  await group.receive(0, `raw-${tag}`, [buffer], HOUR_MS).promise
  if (buffer[bytes - 1] !== patternByte(bytes - 1)) throw new Error(`raw Gloo: the last byte of ${bytes} arrived wrong`)
  await group.send(0, `ack-${tag}`, [ack], HOUR_MS).promise
}
group.destroy()
process.disconnect()
