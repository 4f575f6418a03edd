/**
 * Collective groups of the shm backend, run by the transport in each member's transfer agent. One
 * POSIX shared-memory segment holds every rank's heap (rank r's at r * capacity): rank 0 creates
 * it and announces its name and token in the creation's rendezvous; every other rank maps it and
 * counts itself in the segment's header, and the last one to do so unlinks the name. From there on
 * the memory lives only as long as some process maps it: a crashed rank leaves nothing in
 * /dev/shm. Should a rank fail before mapping it, the creation fails and rank 0, which keeps the
 * name until its group is destroyed, unlinks it then.
 */
import { TransferError } from "@tensorlane/core"
import { type GroupSetup } from "@tensorlane/core/plugin"
import { TRANSPORT, toTensorlaneError } from "./failures.js"
import { loadAddon } from "../Loader.js"
import { groupKey, heapBytesPerRank, segmentNameFor } from "./settings.js"

interface Announcement {
  readonly name: string
  readonly token: string
  readonly capacity: number
}

/** Names rank 0 created, by group, until the group is destroyed. */
const created = new Map<string, string>()

const encoder = new TextEncoder()
const decoder = new TextDecoder()

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

const unlinkQuietly = (name: string): void => {
  try {
    loadAddon().unlinkSegment(name)
  } catch {
    // Gone already: what we wanted.
  }
}

export const createShmGroup = async (setup: GroupSetup): Promise<void> => {
  const addon = loadAddon()
  const key = groupKey(setup.name)
  const what = `creating shm group "${setup.name}" (rank ${setup.rank} of ${setup.worldSize})`
  try {
    let mine = new Uint8Array(0)
    if (setup.rank === 0) {
      const capacity = heapBytesPerRank()
      const name = segmentNameFor(setup.name)
      const token = addon.createSegment(key, name, capacity * setup.worldSize)
      created.set(setup.name, name)
      if (setup.worldSize === 1) unlinkQuietly(name)
      mine = encoder.encode(JSON.stringify({ name, token, capacity } satisfies Announcement))
    }
    const announced = parseAnnouncement((await setup.allGather(mine))[0], setup.name)
    if (setup.rank === 0) return
    const bytes = addon.openSegment(key, announced.name, announced.token)
    if (addon.countOpener(key) === setup.worldSize - 1) addon.unlinkSegment(announced.name)
    if (bytes !== announced.capacity * setup.worldSize) {
      throw new TransferError({ message: `${what}: mapped ${bytes} bytes, rank 0 announced ${announced.capacity * setup.worldSize}`, transport: TRANSPORT })
    }
  } catch (error) {
    destroyShmGroup(setup.name)
    throw toTensorlaneError(error, what)
  }
}

export const destroyShmGroup = (name: string): void => {
  const segment = created.get(name)
  created.delete(name)
  if (segment !== undefined) unlinkQuietly(segment)
  loadAddon().detachSegment(groupKey(name))
}
