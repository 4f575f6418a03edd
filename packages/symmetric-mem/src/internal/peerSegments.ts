/**
 * The consumer's read-only mappings of producers' segments, opened through /proc/<pid>/fd/<fd>
 * and kept for the next object of the same segment. Mappings of processes that are gone are
 * dropped when a new one is opened (a mapping would otherwise keep their memory alive).
 */
import { TransferError } from "@tensorlane/core"
import { TRANSPORT, toTensorlaneError } from "./failures.js"
import { loadAddon } from "./loadAddon.js"

const mapped = new Map<string, { readonly pid: number; readonly key: string }>()

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/** The table key of the producer's segment, mapped now if it was not; `what` names the transfer for errors. */
export const peerSegment = (pid: number, fd: number, token: string, what: string): string => {
  const id = `${pid}:${fd}:${token}`
  const known = mapped.get(id)
  if (known !== undefined) return known.key
  const addon = loadAddon()
  for (const [other, entry] of mapped) {
    if (!alive(entry.pid)) {
      addon.detachSegment(entry.key)
      mapped.delete(other)
    }
  }
  const key = `peer:${id}`
  try {
    addon.openPeerSegment(key, pid, fd, token)
  } catch (error) {
    if (!alive(pid)) throw new TransferError({ message: `${what}: the producer (pid ${pid}) is gone`, transport: TRANSPORT })
    throw toTensorlaneError(error, what)
  }
  mapped.set(id, { pid, key })
  return key
}

export const closePeerSegments = (): void => {
  const addon = loadAddon()
  for (const entry of mapped.values()) addon.detachSegment(entry.key)
  mapped.clear()
}
