/**
 * Forked twice by raw NIXL (../RawNixl.ts): the producer registers a patterned buffer of each size it
 * is told of and says where it is; the reader READs it into its own registered buffer of that size,
 * times each READ, and checks the last byte.
 */
import { loadNixl } from "@tensorlane/transport-nixl"
import type { RawNixlMessage } from "../RawNixl.js"
import { buffersBySize, linkOf, patternByte, patterned, touched } from "./PeerLink.js"

const link = linkOf<RawNixlMessage>(process)
const { addon } = loadNixl()
const host = (bytes: Uint8Array) => ({ mem: "dram", device: 0, bytes }) as const
/** A buffer of each size, registered once for the run, as a program that reuses its buffers registers them. */
const registered = (make: (bytes: number) => Uint8Array) =>
  buffersBySize((bytes) => {
    const buffer = make(bytes)
    addon.acquire(host(buffer))
    return buffer
  })
const sources = registered(patterned)
const destinations = registered(touched)

const answer = (message: RawNixlMessage): RawNixlMessage => {
  if ("register" in message) {
    const key = addon.regionOf(host(sources(message.register)))!
    return { source: { ...addon.localMetadata(), region: { address: key.address, length: key.length, mem: key.mem, device: key.device } } }
  }
  throw new Error("raw NIXL: an unexpected request")
}

const read = async (message: Extract<RawNixlMessage, { readonly read: unknown }>): Promise<RawNixlMessage> => {
  const { read: source, bytes, warmups, repeats } = message
  const into = destinations(bytes)
  // Anything but what the READ brings, so that the check below sees the last one arrive.
  into[bytes - 1] = patternByte(bytes - 1) ^ 0xff
  const memory = host(into)
  const request = {
    agent: source.agent,
    blob: source.blob,
    epoch: source.epoch,
    regions: [source.region],
    remote: [{ region: 0, offset: 0, shape: [bytes], strides: [1], itemSize: 1 }],
    local: [{ tensor: memory, storage: memory }],
  }
  const samplesMs: Array<number> = []
  for (let i = 0; i < warmups + repeats; i++) {
    const start = process.hrtime.bigint()
    await addon.read(request, into).promise
    if (i >= warmups) samplesMs.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  if (into[bytes - 1] !== patternByte(bytes - 1)) throw new Error(`raw NIXL: the last byte of ${bytes} arrived wrong`)
  return { samplesMs }
}

for (;;) {
  const message = await link.next()
  if ("done" in message) break
  try {
    link.send("read" in message ? await read(message) : answer(message))
  } catch (error) {
    link.send({ failed: (error as Error).message })
  }
}
process.disconnect()
