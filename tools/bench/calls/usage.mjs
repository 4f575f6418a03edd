/**
 * A process's costs so far, for loop.mjs: CPU time of the whole process (its main thread, its
 * transfer agent and V8's threads) in microseconds, its page faults (minor: a fresh page; major: one
 * read from disk), and its full garbage collections, the time their pauses took on its main thread,
 * and the longest pause since the last look. For timeline.mjs: when each full collection began.
 */
import { readFileSync } from "node:fs"
import { PerformanceObserver, constants } from "node:perf_hooks"

const collections = { count: 0, pauseMs: 0, longestMs: 0 }
/** The latest full collections, [start on the epoch clock, pause] in ms, for timeline.mjs. */
const recent = []
const MOST_RECENT = 4096
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.detail.kind !== constants.NODE_PERFORMANCE_GC_MAJOR) continue
    collections.count++
    collections.pauseMs += entry.duration
    collections.longestMs = Math.max(collections.longestMs, entry.duration)
    if (recent.push([performance.timeOrigin + entry.startTime, entry.duration]) > MOST_RECENT) recent.shift()
  }
}).observe({ entryTypes: ["gc"] })

/** Fields 10 and 12 of /proc/self/stat, counted after the command's name (which may hold spaces). */
const faults = () => {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ")
  return { minflt: Number(fields[7]), majflt: Number(fields[9]) }
}

/** The full collections since the last look (at most the latest 4096): [start on the epoch clock, pause], in ms. */
export const takeCollections = () => recent.splice(0)

export const processUsage = () => {
  const { user, system } = process.cpuUsage()
  const longestMs = collections.longestMs
  collections.longestMs = 0
  return { cpuUs: user + system, ...faults(), collections: collections.count, pauseMs: collections.pauseMs, longestMs }
}
