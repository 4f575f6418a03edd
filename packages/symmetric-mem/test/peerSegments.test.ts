/**
 * The consumer's cache of producers' segments (src/internal/peerSegments.ts), with this process as
 * the producer: a mapping is kept while the producer holds the segment open, and dropped once the
 * producer's fd no longer names that file (closed, or its number reused by another segment).
 */
import { randomBytes } from "node:crypto"
import { afterEach, expect, it } from "vitest"
import { loadAddon } from "../src/Loader.ts"
import { closePeerSegments, peerSegment } from "../src/internal/peerSegments.ts"

const addon = loadAddon()
const produced: Array<string> = []

/** A segment "produced" by this process, unlinked at once like the transport's; its key, fd and token. */
const produce = () => {
  const id = randomBytes(6).toString("hex")
  const key = `producer-${id}`
  const name = `/tensorlane-sym-peer-test-${id}`
  const token = addon.createSegment(key, name, 4096)
  addon.unlinkSegment(name)
  produced.push(key)
  return { key, token, fd: addon.segmentInfo(key)!.fd }
}

afterEach(() => {
  closePeerSegments()
  for (const key of produced.splice(0)) addon.detachSegment(key)
})

it("keeps a mapping while the producer holds the segment, and drops it once the producer let go, though the producer lives", () => {
  const a = produce()
  const mappedA = peerSegment(process.pid, a.fd, a.token, "test read")
  expect(peerSegment(process.pid, a.fd, a.token, "test read")).toBe(mappedA)
  const b = produce()
  peerSegment(process.pid, b.fd, b.token, "test read")
  // Both still held by their producer: both kept.
  expect(addon.segmentKeys()).toEqual(expect.arrayContaining([mappedA]))
  // The producer lets go of a (its fd closes, nothing else maps it); the next segment may take its fd number.
  addon.detachSegment(a.key)
  const c = produce()
  const mappedC = peerSegment(process.pid, c.fd, c.token, "test read")
  expect(addon.segmentKeys()).not.toContain(mappedA)
  expect(addon.segmentKeys()).toContain(mappedC)
  expect(addon.segmentKeys().filter((k) => k.startsWith("peer:"))).toHaveLength(2)
})
