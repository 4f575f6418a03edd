/**
 * Taking a block's memory when it is allocated. Segments are sparse files on tmpfs (/dev/shm): a
 * page costs nothing until first touched, and a page first touched when the file system is full
 * raises SIGBUS, which kills the process. posix_fallocate takes the pages at allocation instead,
 * and a full file system becomes an OutOfMemoryError there.
 */
import * as fs from "node:fs"
import { type GroupMember, OutOfMemoryError } from "@tensorlane/core"
import type { Gather } from "../Backend.js"
import { SymmetricMismatchError } from "../Errors.js"
import { loadAddon } from "../Loader.js"
import { toTensorlaneError } from "./failures.js"

/** Where glibc's shm_open puts segments. */
const SHM_DIR = "/dev/shm"

const room = (): string => {
  try {
    const s = fs.statfsSync(SHM_DIR)
    return `${s.bavail * s.bsize} of ${s.blocks * s.bsize} bytes free`
  } catch (error) {
    return `statfs failed: ${error instanceof Error ? error.message : String(error)}`
  }
}

export interface Reservation {
  /** The segment's key in the addon's table. */
  readonly key: string
  /** Of the block, in the segment's data. */
  readonly offset: number
  readonly byteLength: number
  /** Of the heap the block is in, for the error. */
  readonly capacity: number
  /** Names the heap in the error ("the shm heap of group ..."). */
  readonly heap: string
}

const fullError = (r: Reservation, who: string): OutOfMemoryError =>
  new OutOfMemoryError({
    message: `${r.heap} cannot take ${r.byteLength} more bytes: ${SHM_DIR} is full (${who}; posix_fallocate failed with ENOSPC). Free memory in ${SHM_DIR}, or give the container a larger one (docker run --shm-size)`,
    requested: r.byteLength,
    capacity: r.capacity,
  })

/** Takes the block's pages: false where /dev/shm is full (ENOSPC); any other failure of the addon as a typed error. */
const reserveSegment = (r: Reservation): boolean => {
  try {
    return loadAddon().reserveSegment(r.key, r.offset, r.byteLength)
  } catch (error) {
    throw toTensorlaneError(error, `reserving ${r.byteLength} bytes of ${r.heap}`)
  }
}

/** Reserves a block of this process's own heap (the staging heap); OutOfMemoryError when /dev/shm is full. */
export const reserve = (r: Reservation): void => {
  if (!reserveSegment(r)) throw fullError(r, room())
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** A rank's word in the round: "" (reserved), "full:<room>" (ENOSPC) or "failed:<why>" (anything else). */
const FULL = "full:"
const FAILED = "failed:"

/**
 * Every rank reserves its own copy of a new symmetric block; one gather tells every rank whether
 * all could, so that they all fail and give the block back in the same round, and their heaps stay
 * alike: OutOfMemoryError where /dev/shm is full; a rank whose reservation failed otherwise (a file
 * size limit, an I/O error) raises that, and the others SymmetricMismatchError naming it.
 */
export const reserveOnEveryRank = async (member: GroupMember, gather: Gather, r: Reservation, giveBack: () => void | Promise<void>): Promise<void> => {
  let words: ReadonlyArray<string>
  let own: Error | undefined
  try {
    let mine: string
    try {
      mine = reserveSegment(r) ? "" : `${FULL}rank ${member.rank}: ${room()}`
    } catch (error) {
      own = error as Error
      mine = `${FAILED}rank ${member.rank}: ${own.message}`
    }
    words = (await gather(encoder.encode(mine))).map((b) => decoder.decode(b)).filter((s) => s.length > 0)
  } catch (error) {
    await giveBack()
    throw error
  }
  if (words.length === 0) return
  await giveBack()
  if (own !== undefined) throw own
  const failed = words.filter((w) => w.startsWith(FAILED))
  if (failed.length > 0) {
    throw new SymmetricMismatchError({
      message: `${r.heap}: another rank could not reserve its copy of a block of ${r.byteLength} bytes (${failed.map((w) => w.slice(FAILED.length)).join("; ")})`,
      group: member.name,
      what: "peer",
    })
  }
  throw fullError(r, words.map((w) => w.slice(FULL.length)).join("; "))
}
