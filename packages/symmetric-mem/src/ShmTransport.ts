/**
 * The `shm` tensor transport: same-host, one-sided. The producer describes where each tensor's
 * bytes lie in a shared segment it keeps open: tensors on a symmetric heap (allocateSymmetric) are
 * described in place, others are first copied into the producer's staging heap. The consumer maps
 * the segment read-only through /proc/<pid>/fd/<fd> and copies straight into its buffers: no socket
 * carries the bytes, and the producer's threads do nothing per transfer. Bytes described in place
 * are pinned (natively, process-wide) until the object is released, so that freeSymmetric refuses
 * to free a block a consumer may still read.
 *
 * Its collective groups (`createCollectiveGroup(actors, { backend: "shm" })`) are what
 * allocateSymmetric's shm backend allocates from: see internal/shmGroups.ts.
 */
import { DeviceError, ShapeError, TransferError } from "@tensorlane/core"
import { defineTransport } from "@tensorlane/core/plugin"
import { TRANSPORT, toTensorlaneError } from "./internal/failures.js"
import { loadAddon } from "./Loader.js"
import { closePeerSegments, peerSegment } from "./internal/peerSegments.js"
import { bootId } from "./internal/settings.js"
import { type ShmMetadata, type ShmSegmentRef, type ShmTensorRef, parseShmMetadata } from "./ShmMetadata.js"
import { createShmGroup, destroyShmGroup } from "./internal/shmGroups.js"
import { STAGING_KEY, closeStaging, stage, stagedObjects, unstage } from "./internal/staging.js"

/** Objects with bytes described in place (pinned), until released. */
const exporting = new Set<string>()

/** Gives back what an object holds: its staging blocks and its pins on heap bytes. */
const release = (objectId: string): void => {
  unstage(objectId)
  if (exporting.delete(objectId)) loadAddon().releaseExport(objectId)
}

export const shm = defineTransport({
  name: TRANSPORT,
  capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, sameHost: true },

  extractMetadata: async ({ objectId, tensors }): Promise<ShmMetadata> => {
    const addon = loadAddon()
    const segments: Array<ShmSegmentRef> = []
    const segmentIndex = new Map<string, number>()
    const indexOf = (key: string): number => {
      let index = segmentIndex.get(key)
      if (index === undefined) {
        const info = addon.segmentInfo(key)!
        index = segments.push({ fd: info.fd, token: info.token }) - 1
        segmentIndex.set(key, index)
      }
      return index
    }
    const refs: Array<ShmTensorRef> = []
    try {
      for (const t of tensors) {
        if (t.device !== "cpu") {
          throw new DeviceError({ message: `the shm transport moves host memory only; object ${objectId} holds a tensor on ${t.device}`, device: t.device, transport: TRANSPORT })
        }
        const bytes = t.isContiguous() ? t.storage.bytes.subarray(t.byteOffset, t.byteOffset + t.nbytes) : undefined
        const found = bytes === undefined ? undefined : addon.locate(bytes)
        if (bytes !== undefined && found !== undefined && found.key !== STAGING_KEY) {
          addon.pinExport(objectId, bytes)
          exporting.add(objectId)
          refs.push({ segment: indexOf(found.key), offset: found.offset, nbytes: t.nbytes })
        } else {
          const offset = await stage(objectId, t)
          refs.push({ segment: indexOf(STAGING_KEY), offset, nbytes: t.nbytes })
        }
      }
    } catch (error) {
      release(objectId)
      throw error
    }
    return { version: 1, boot: bootId(), pid: process.pid, segments, tensors: refs }
  },

  release: ({ objectId }) => release(objectId),

  fetch: async ({ objectId, producer, consumer, tensors, metadata, into, signal }) => {
    const what = `shm fetch of ${objectId} from ${producer} to ${consumer}`
    const m = parseShmMetadata(metadata, into.length, objectId)
    if (m.boot !== bootId()) {
      throw new TransferError({ message: `${what}: the producer runs on another host; the shm transport works between processes of one host`, transport: TRANSPORT })
    }
    const addon = loadAddon()
    for (let i = 0; i < into.length; i++) {
      if (signal.aborted) throw signal.reason
      const target = into[i]
      const ref = m.tensors[i]
      if (!target.isContiguous()) throw new ShapeError({ message: `${what}: target tensor ${i} is a strided view; shm writes into contiguous tensors only` })
      if (ref.nbytes !== target.nbytes || ref.nbytes !== tensors[i].nbytes) {
        throw new ShapeError({ message: `${what}: tensor ${i} has ${ref.nbytes} bytes in the producer's segment, ${tensors[i].nbytes} in its description, ${target.nbytes} in the target` })
      }
      if (ref.nbytes === 0) continue
      const segment = m.segments[ref.segment]
      const key = peerSegment(m.pid, segment.fd, segment.token, what)
      try {
        await addon.readSegment(key, ref.offset, target.storage.bytes.subarray(target.byteOffset, target.byteOffset + target.nbytes))
      } catch (error) {
        throw toTensorlaneError(error, what)
      }
    }
  },

  createGroup: createShmGroup,
  destroyGroup: async (name) => destroyShmGroup(name),

  inspect: () => ({
    registrations: [...stagedObjects().map((objectId) => `shm staging ${objectId}`), ...[...exporting].map((objectId) => `shm in-place export ${objectId}`)],
  }),

  close: () => {
    for (const objectId of exporting) release(objectId)
    closePeerSegments()
    closeStaging()
  },
})
