/**
 * The transport packages `tensorlane doctor` knows, as data: adding a package is one entry. Each is
 * an optional peer of the CLI, imported dynamically, so a missing package is reported, not a crash.
 */
import * as fs from "node:fs"
import { dirname, join } from "node:path"

/** What a package's status function says, in the doctor's words. */
export interface StatusFacts {
  /** false: the status function explained why not (`reason`). */
  readonly ready: boolean
  /** Label and value, printed in this order (library path, version, addon...). */
  readonly details: ReadonlyArray<readonly [string, string]>
  readonly reason?: string
  /** Every path tried for what is missing. */
  readonly tried?: ReadonlyArray<string>
}

export interface PackageEntry {
  readonly packageName: string
  /** The transport names the package registers, as `tensorTransport` and `backend` take them. */
  readonly transports: ReadonlyArray<string>
  /** The export that describes the package's native side; it may throw NativeLibraryError. */
  readonly statusExport: string
  /** Needs a CUDA device: reported "no GPU" on a machine without one, left out of default benches. */
  readonly gpuOnly: boolean
  /** Reads the status object; packages whose status has no dedicated reader go through `genericFacts`. */
  readonly read?: (status: unknown) => StatusFacts
  /** How to get the package and its native library. */
  readonly fix: string
}

const text = (value: unknown): string =>
  Array.isArray(value) ? value.join(", ") : typeof value === "bigint" ? value.toString() : String(value)

/** For status objects of any shape: `ready` and `error` when present, every other scalar field as a detail. */
export const genericFacts = (status: unknown): StatusFacts => {
  const fields = typeof status === "object" && status !== null ? (status as Record<string, unknown>) : { value: status }
  const details = Object.entries(fields)
    .filter(([key, value]) => key !== "ready" && key !== "error" && value !== undefined && typeof value !== "object")
    .map(([key, value]) => [key, text(value)] as const)
  const ready = typeof fields.ready === "boolean" ? fields.ready : true
  return { ready, details, ...(typeof fields.error === "string" ? { reason: fields.error } : {}) }
}

interface GlooStatusShape {
  readonly ready: boolean
  readonly addon: string | ReadonlyArray<string>
  readonly library: string | undefined
  readonly glooVersion: string | undefined
  readonly error: string | undefined
}

const glooFacts = (status: unknown): StatusFacts => {
  const s = status as GlooStatusShape
  if (!s.ready) return { ready: false, details: [], reason: s.error ?? "unknown", tried: typeof s.addon === "string" ? [s.addon] : s.addon }
  return {
    ready: true,
    details: [
      ["gloo", `${s.glooVersion ?? "version unknown"} at ${s.library ?? "(not mapped)"}`],
      ["addon", text(s.addon)],
    ],
  }
}

interface NixlStatusShape {
  readonly library: string
}

/** The wheel's version, from the dist-info folder that sits next to its library folder. */
const nixlWheel = (library: string): string | undefined => {
  const site = dirname(dirname(library))
  try {
    for (const name of fs.readdirSync(site)) {
      const match = /^nixl_(cu\d+)-(.+)\.dist-info$/.exec(name)
      if (match !== null) return `nixl-${match[1]} ${match[2]}`
    }
    return undefined
  } catch {
    return undefined
  }
}

const nixlFacts = (status: unknown): StatusFacts => {
  const { library } = status as NixlStatusShape
  const wheel = library.includes("/") ? nixlWheel(library) : undefined
  return { ready: true, details: [["libnixl_capi", `${library}${wheel !== undefined ? ` (wheel ${wheel})` : ""}`], ["plugins", process.env.NIXL_PLUGIN_DIR || join(dirname(library), "plugins")]] }
}

export const PACKAGES: ReadonlyArray<PackageEntry> = [
  {
    packageName: "@tensorlane/transport-gloo",
    transports: ["gloo"],
    statusExport: "glooStatus",
    gpuOnly: false,
    read: glooFacts,
    fix: "npm install @tensorlane/transport-gloo, with Debian's libgloo-dev (bash tools/setup.sh in the repository)",
  },
  {
    packageName: "@tensorlane/transport-nixl",
    transports: ["nixl"],
    statusExport: "nixlStatus",
    gpuOnly: false,
    read: nixlFacts,
    fix: "npm install @tensorlane/transport-nixl, with the nixl-cu12 wheel (bash tools/setup.sh in the repository)",
  },
  {
    packageName: "@tensorlane/transport-nccl",
    transports: ["nccl"],
    statusExport: "ncclStatus",
    gpuOnly: true,
    fix: "npm install @tensorlane/transport-nccl, with libnccl.so.2 (wheel nvidia-nccl-cu12) and a CUDA driver",
  },
  {
    packageName: "@tensorlane/symmetric-mem",
    transports: ["shm"],
    statusExport: "symmetricMemStatus",
    gpuOnly: false,
    fix: "npm install @tensorlane/symmetric-mem",
  },
]
