/** Whether a process exists, and what Linux's /proc tells of it (undefined where there is no /proc, or no such process). */
import * as fs from "node:fs"

/**
 * The fields of /proc/<pid>/stat from field 3 (the state) on: field N is at index N - 3. The command
 * name (field 2) may contain spaces and parentheses: the fields after the last ")" are fixed.
 */
export const statFields = (pid: number | "self"): ReadonlyArray<string> | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/** When a process started (clock ticks since boot): with its pid, names one process even once pids are reused. */
export const startTimeOf = (pid: number | "self"): string | undefined => statFields(pid)?.[19]

/** This process's pid namespace: pids name processes only inside one. */
export const pidNamespace = (): string | undefined => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return undefined
  }
}

/** Whether a process with this pid exists (one of another user's counts). */
export const pidExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}
