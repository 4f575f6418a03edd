/**
 * The cluster directory (`<tmpdir>/tensorlane-XXXXXX`) holds the Unix sockets of a cluster's processes.
 * `shutdown()` removes it; a driver that exits without shutting down (an uncaught exception) removes
 * it as it exits; a killed driver cannot, so every start sweeps the directories of drivers that are
 * gone. The file `driver` in each names its driver by pid namespace, pid and start time: a pid alone
 * may have been reused, and another pid namespace's pids (a container sharing /tmp) mean nothing here.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { InvalidSettingError } from "../Errors.js"
import { pidExists, pidNamespace, startTimeOf } from "./processes.js"

const PREFIX = "tensorlane-"
const OWNER_FILE = "driver"

interface Owner {
  readonly pidns: string | undefined
  readonly pid: number
  readonly start: string | undefined
}

/** Directories of this process's clusters that are not shut down: removed if the process exits first. */
const open = new Set<string>()
let removeAtExit: (() => void) | undefined

/** Whether the driver that made a directory is gone (false where this process cannot tell). */
const ownerGone = (owner: Owner, pidns: string | undefined): boolean => {
  if (owner.pidns !== pidns || !Number.isInteger(owner.pid)) return false
  return owner.start !== undefined ? startTimeOf(owner.pid) !== owner.start : !pidExists(owner.pid)
}

/** Removes the cluster directories of this user whose driver is gone. */
const sweep = (tmp: string, pidns: string | undefined): void => {
  const uid = process.getuid?.()
  for (const name of fs.readdirSync(tmp)) {
    if (!name.startsWith(PREFIX)) continue
    const dir = join(tmp, name)
    try {
      const stat = fs.lstatSync(dir)
      if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) continue
      const owner = JSON.parse(fs.readFileSync(join(dir, OWNER_FILE), "utf8")) as Owner
      if (ownerGone(owner, pidns)) fs.rmSync(dir, { recursive: true, force: true })
    } catch {
      // Not a cluster directory, not ours, or one being made or removed right now.
    }
  }
}

/**
 * Makes a cluster directory for this process (the driver), after sweeping those of dead drivers;
 * InvalidSettingError (TMPDIR) where the temporary folder is missing or not this user's to write.
 */
export const createClusterDir = (): string => {
  const tmp = os.tmpdir()
  const pidns = pidNamespace()
  let dir: string
  try {
    sweep(tmp, pidns)
    dir = fs.mkdtempSync(join(tmp, PREFIX))
  } catch (error) {
    throw new InvalidSettingError({
      message: `the cluster's folder cannot be made in ${tmp}, the temporary folder (TMPDIR): ${error instanceof Error ? error.message : String(error)}; set TMPDIR to a folder this user can write to`,
      variable: "TMPDIR",
      value: process.env.TMPDIR ?? "",
      accepts: "a folder this user can write to",
    })
  }
  const owner: Owner = { pidns, pid: process.pid, start: startTimeOf("self") }
  fs.writeFileSync(join(dir, OWNER_FILE), JSON.stringify(owner), { mode: 0o600 })
  open.add(dir)
  if (removeAtExit === undefined) {
    removeAtExit = () => {
      for (const d of open) fs.rmSync(d, { recursive: true, force: true })
    }
    process.on("exit", removeAtExit)
  }
  return dir
}

export const removeClusterDir = (dir: string): void => {
  open.delete(dir)
  fs.rmSync(dir, { recursive: true, force: true })
}
