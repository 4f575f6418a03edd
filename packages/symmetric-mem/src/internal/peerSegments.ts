/**
 * The consumer's read-only mappings of producers' segments, opened through /proc/<pid>/fd/<fd>
 * and kept for the next object of the same segment. A mapping keeps the producer's whole segment
 * in memory, so one whose producer no longer holds that segment open (the producer died, or
 * destroyed the group and let go of its heap) is dropped: checked before a new one is opened, and
 * on a slow timer while any is kept.
 */
import * as fs from "node:fs"
import { TransferError } from "@tensorlane/core"
import { TRANSPORT, toTensorlaneError } from "./failures.js"
import { loadAddon } from "../Loader.js"

interface Mapping {
  readonly pid: number
  readonly fd: number
  readonly key: string
}

/** How often kept mappings are checked against their producers. */
const SWEEP_MS = 1_000

const mapped = new Map<string, Mapping>()
let sweeper: ReturnType<typeof setInterval> | undefined

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/** Whether the producer's fd still names the file this process mapped (a gone pid or fd, or a reused fd number, do not). */
const stillOpen = (m: Mapping): boolean => {
  const ours = loadAddon().segmentInfo(m.key)
  if (ours === undefined) return false
  try {
    const theirs = fs.statSync(`/proc/${m.pid}/fd/${m.fd}`)
    const mine = fs.fstatSync(ours.fd)
    return theirs.ino === mine.ino && theirs.dev === mine.dev
  } catch {
    return false
  }
}

const dropStale = (): void => {
  const addon = loadAddon()
  for (const [id, m] of mapped) {
    if (stillOpen(m)) continue
    addon.detachSegment(m.key)
    mapped.delete(id)
  }
  if (mapped.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper)
    sweeper = undefined
  }
}

/** The table key of the producer's segment, mapped now if it was not; `what` names the transfer for errors. */
export const peerSegment = (pid: number, fd: number, token: string, what: string): string => {
  const id = `${pid}:${fd}:${token}`
  const known = mapped.get(id)
  if (known !== undefined) return known.key
  dropStale()
  const addon = loadAddon()
  const key = `peer:${id}`
  try {
    addon.openPeerSegment(key, pid, fd, token)
  } catch (error) {
    if (!alive(pid)) throw new TransferError({ message: `${what}: the producer (pid ${pid}) is gone`, transport: TRANSPORT })
    throw toTensorlaneError(error, what)
  }
  mapped.set(id, { pid, fd, key })
  sweeper ??= setInterval(dropStale, SWEEP_MS).unref()
  return key
}

export const closePeerSegments = (): void => {
  const addon = loadAddon()
  for (const m of mapped.values()) addon.detachSegment(m.key)
  mapped.clear()
  if (sweeper !== undefined) clearInterval(sweeper)
  sweeper = undefined
}
