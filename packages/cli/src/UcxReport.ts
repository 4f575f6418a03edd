/**
 * What UCX says about itself in its debug log: its version and location, the table of transports and
 * devices it found ("Available Transports and Devices"), and the modules it could not load (the cuda
 * module without libcuda.so.1, say).
 */
import { normalize } from "node:path"

export interface UcxTransport {
  readonly component: string
  readonly transport: string
  readonly enabled: boolean
  /** The enabled ones. */
  readonly devices: ReadonlyArray<string>
}

export interface UcxReport {
  readonly version: string | undefined
  readonly library: string | undefined
  readonly transports: ReadonlyArray<UcxTransport>
  /** Module file and why it did not load. */
  readonly unloadedModules: ReadonlyArray<{ readonly module: string; readonly reason: string }>
}

const VERSION = /UCX\s+INFO\s+Version (\S+) \(loaded from ([^,]+),/
const MODULE_FAILURE = /dlopen\('([^']+)'[^)]*\) failed: (.*)$/
// A row of the table: | type | component | + tl | + dev0 + dev1 |; the type column is blank on continuation rows.
const TABLE_ROW = /\|\s*[\w-]*\s*\|\s*(\w+)\s*\|\s*([+-])\s*(\w+)\s*\|\s*(.*?)\s*\|\s*$/

export const parseUcxLog = (log: string): UcxReport => {
  let version: string | undefined
  let library: string | undefined
  const transports = new Map<string, UcxTransport>()
  const unloaded = new Map<string, string>()
  let inTable = false
  for (const line of log.split("\n")) {
    const v = VERSION.exec(line)
    if (v !== null) {
      version = v[1]
      library = normalize(v[2])
    }
    const m = MODULE_FAILURE.exec(line)
    if (m !== null) unloaded.set(m[1].split("/").pop() ?? m[1], m[2])
    if (line.includes("Available Transports and Devices")) inTable = true
    else if (inTable && line.includes("Legend:")) inTable = false
    else if (inTable) {
      const row = TABLE_ROW.exec(line)
      if (row === null || row[1] === "Component") continue
      // Devices are listed as "+ eth0 + lo"; disabled ones ("- eth1") are left out.
      const devices = [...row[4].matchAll(/([+-])\s*(\S+)/g)].filter((d) => d[1] === "+").map((d) => d[2])
      transports.set(row[3], { component: row[1], transport: row[3], enabled: row[2] === "+", devices })
    }
  }
  return {
    version,
    library,
    transports: [...transports.values()],
    unloadedModules: [...unloaded].map(([module, reason]) => ({ module, reason })),
  }
}
