/**
 * Collective groups of the shm backend, run by the transport in each member's transfer agent. One
 * POSIX shared-memory segment holds every rank's heap (rank r's at r * capacity): rank 0 creates
 * it and shares its name and token in the rendezvous, the others map it, and a second rendezvous
 * proves that every rank mapped it; then the name is unlinked at once. From there on the memory
 * lives only as long as some process maps it: a crashed rank leaves nothing in /dev/shm.
 */
import { type GroupSetup, TransferError } from "@tensorlane/core"
import { loadAddon } from "./loadAddon.js"
import { TRANSPORT, toTensorlaneError } from "./failures.js"
import { groupKey, heapBytesPerRank, segmentNameFor } from "./settings.js"

interface Announcement {
  readonly name: string
  readonly token: string
  readonly capacity: number
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const encode = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value))

const parseAnnouncement = (blob: Uint8Array | undefined, group: string): Announcement => {
  let value: Partial<Announcement> | undefined
  try {
    value = JSON.parse(decoder.decode(blob)) as Partial<Announcement>
  } catch {
    value = undefined
  }
  if (typeof value?.name !== "string" || typeof value.token !== "string" || !Number.isSafeInteger(value.capacity)) {
    throw new TransferError({ message: `rank 0 of shm group "${group}" announced no heap`, transport: TRANSPORT })
  }
  return value as Announcement
}

/** Unlinks a name and forgets the key, ignoring what is already gone: the cleanup of a failed creation. */
const abandon = (key: string, name: string | undefined): void => {
  const addon = loadAddon()
  if (name !== undefined) {
    try {
      addon.unlinkSegment(name)
    } catch {
      // Already unlinked by another rank, which is what we want.
    }
  }
  addon.detachSegment(key)
}

export const createShmGroup = async (setup: GroupSetup): Promise<void> => {
  const addon = loadAddon()
  const key = groupKey(setup.name)
  const what = `creating shm group "${setup.name}" (rank ${setup.rank} of ${setup.worldSize})`
  let name: string | undefined
  try {
    let mine: Uint8Array = new Uint8Array(0)
    if (setup.rank === 0) {
      const capacity = heapBytesPerRank()
      name = segmentNameFor(setup.name)
      const token = addon.createSegment(key, name, capacity * setup.worldSize)
      mine = encode({ name, token, capacity } satisfies Announcement)
    }
    const announced = parseAnnouncement((await setup.allGather(mine))[0], setup.name)
    name = announced.name
    let failure = ""
    if (setup.rank !== 0) {
      try {
        const bytes = addon.openSegment(key, announced.name, announced.token)
        if (bytes !== announced.capacity * setup.worldSize) failure = `mapped ${bytes} bytes, rank 0 announced ${announced.capacity * setup.worldSize}`
      } catch (error) {
        failure = error instanceof Error ? error.message : String(error)
      }
    }
    const reports = await setup.allGather(encoder.encode(failure))
    addon.unlinkSegment(name)
    const failed = reports.map((r, rank) => [rank, decoder.decode(r)] as const).filter(([, text]) => text !== "")
    if (failed.length > 0) {
      throw new TransferError({ message: `${what}: ${failed.map(([rank, text]) => `rank ${rank}: ${text}`).join("; ")}`, transport: TRANSPORT })
    }
  } catch (error) {
    abandon(key, name)
    throw toTensorlaneError(error, what)
  }
}

export const destroyShmGroup = (name: string): void => {
  loadAddon().detachSegment(groupKey(name))
}
