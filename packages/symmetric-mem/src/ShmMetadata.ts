/**
 * What the shm transport's producer hands its consumers: where each tensor's bytes lie in a shared
 * segment the producer keeps open (its pid and fd, and the token that proves the file is that
 * segment). It comes from a peer: every field is checked here, every range again natively.
 */
import { ProtocolError } from "@tensorlane/core"

export interface ShmSegmentRef {
  readonly fd: number
  readonly token: string
}

export interface ShmTensorRef {
  /** Index into `segments`. */
  readonly segment: number
  /** Byte offset in the segment's data. */
  readonly offset: number
  readonly nbytes: number
}

export interface ShmMetadata {
  readonly version: 1
  /** The producer host's boot id: a pid means nothing on another host. */
  readonly boot: string
  readonly pid: number
  readonly segments: ReadonlyArray<ShmSegmentRef>
  readonly tensors: ReadonlyArray<ShmTensorRef>
}

const isIndex = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x) && x >= 0

export const parseShmMetadata = (metadata: unknown, count: number, objectId: string): ShmMetadata => {
  const bad = (why: string): never => {
    throw new ProtocolError({ message: `shm metadata of object ${objectId} is malformed: ${why}` })
  }
  const m = metadata as Partial<ShmMetadata> | undefined
  if (typeof m !== "object" || m === null) return bad("not an object")
  if (m.version !== 1) return bad(`unknown version ${String(m.version)}`)
  if (typeof m.boot !== "string" || m.boot.length === 0) return bad("no boot id")
  if (!isIndex(m.pid) || m.pid === 0) return bad("no pid")
  if (!Array.isArray(m.segments)) return bad("no segments")
  m.segments.forEach((s: Partial<ShmSegmentRef>, i) => {
    if (typeof s !== "object" || s === null || !isIndex(s.fd) || typeof s.token !== "string" || !/^[0-9a-f]{32}$/.test(s.token)) {
      bad(`segment ${i} is not { fd, token }`)
    }
  })
  if (!Array.isArray(m.tensors) || m.tensors.length !== count) {
    return bad(`describes ${Array.isArray(m.tensors) ? m.tensors.length : 0} tensors, the object has ${count}`)
  }
  m.tensors.forEach((t: Partial<ShmTensorRef>, i) => {
    if (typeof t !== "object" || t === null || !isIndex(t.segment) || !isIndex(t.offset) || !isIndex(t.nbytes)) bad(`tensor ${i} is not { segment, offset, nbytes }`)
    if (t.segment! >= m.segments!.length) bad(`tensor ${i} names segment ${t.segment}, there are ${m.segments!.length}`)
  })
  return m as ShmMetadata
}
