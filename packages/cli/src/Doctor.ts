/**
 * `tensorlane doctor`: every transport package with its state (ready, missing library with the paths
 * tried and the fix, no GPU, not installed), the versions and locations of the packages and native
 * libraries, and the UCX transports NIXL sees.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import type { PackageStatus } from "@tensorlane/core/native"
import { PACKAGES, type PackageEntry } from "./Packages.js"
import { parseUcxLog, type UcxReport } from "./UcxReport.js"

export type TransportState = "ready" | "missing library" | "no GPU" | "not installed" | "error"

export interface PackageReport {
  readonly packageName: string
  readonly transports: ReadonlyArray<string>
  readonly gpuOnly: boolean
  readonly state: TransportState
  readonly version?: string
  readonly location?: string
  readonly details: ReadonlyArray<readonly [string, string]>
  readonly reason?: string
  readonly tried?: ReadonlyArray<string>
  readonly fix?: string
}

export interface DoctorReport {
  readonly node: string
  readonly platform: string
  /** NVIDIA GPUs the driver lists; empty without a driver or a GPU. */
  readonly gpus: ReadonlyArray<string>
  readonly core: { readonly version: string; readonly location: string } | undefined
  readonly packages: ReadonlyArray<PackageReport>
  /** What UCX reports when NIXL loads it; undefined when NIXL is not ready. */
  readonly ucx: UcxReport | { readonly error: string } | undefined
}

interface Manifest {
  readonly version: string
  readonly location: string
}

/** The package's version and folder, found from where Node resolves it; undefined when it does not resolve. */
const manifestOf = (packageName: string): Manifest | undefined => {
  let entry: string
  try {
    entry = fileURLToPath(import.meta.resolve(packageName))
  } catch {
    return undefined
  }
  for (let dir = entry; dir !== join(dir, ".."); dir = join(dir, "..")) {
    const file = join(dir, "package.json")
    if (!fs.existsSync(file)) continue
    const manifest = JSON.parse(fs.readFileSync(file, "utf8")) as { name?: string; version?: string }
    if (manifest.name === packageName) return { version: manifest.version ?? "unknown", location: dir }
  }
  return undefined
}

export const listGpus = (): ReadonlyArray<string> => {
  try {
    return fs.readdirSync("/proc/driver/nvidia/gpus")
  } catch {
    return []
  }
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** A NativeLibraryError from @tensorlane/core, recognised by its tag: a transport may resolve another copy of core than the CLI. */
const asNativeLibraryError = (error: unknown): { message: string; tried: ReadonlyArray<string>; fix: string } | undefined =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "NativeLibraryError"
    ? (error as { message: string; tried: ReadonlyArray<string>; fix: string })
    : undefined

const isPackageStatus = (status: unknown): status is PackageStatus => {
  const details = typeof status === "object" && status !== null ? (status as Partial<PackageStatus>).details : undefined
  return Array.isArray(details) && details.every((d) => Array.isArray(d) && d.length === 2 && d.every((part) => typeof part === "string"))
}

export const probePackage = async (entry: PackageEntry, hasGpu: boolean): Promise<PackageReport> => {
  const base = { packageName: entry.packageName, transports: entry.transports, gpuOnly: entry.gpuOnly, details: [] }
  const manifest = manifestOf(entry.packageName)
  if (manifest === undefined) return { ...base, state: "not installed", fix: entry.fix }
  const found = { ...base, version: manifest.version, location: manifest.location }
  let status: unknown
  try {
    const module = (await import(entry.packageName)) as Record<string, unknown>
    const describe = module[entry.statusExport]
    if (typeof describe !== "function") {
      return { ...found, state: "error", reason: `${entry.packageName} exports no ${entry.statusExport} function` }
    }
    status = await describe()
  } catch (error) {
    const missing = asNativeLibraryError(error)
    if (missing !== undefined) return { ...found, state: "missing library", reason: missing.message, tried: missing.tried, fix: missing.fix }
    return { ...found, state: "error", reason: messageOf(error) }
  }
  if (!isPackageStatus(status)) return { ...found, state: "error", reason: `${entry.statusExport} returned no details (core's PackageStatus)` }
  return { ...found, state: entry.gpuOnly && !hasGpu ? "no GPU" : "ready", details: status.details }
}

const run = promisify(execFile)

/** Runs internal/UcxProbe.js with UCX's debug log on and reads what UCX found. */
const probeUcx = async (): Promise<UcxReport | { readonly error: string }> => {
  const probe = fileURLToPath(new URL("./internal/UcxProbe.js", import.meta.url))
  try {
    const { stdout, stderr } = await run(process.execPath, [probe], {
      env: { ...process.env, UCX_LOG_LEVEL: "debug" },
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    return parseUcxLog(`${stdout}\n${stderr}`)
  } catch (error) {
    return { error: `the UCX probe (${probe}) failed: ${messageOf(error)}` }
  }
}

export const runDoctor = async (): Promise<DoctorReport> => {
  const gpus = listGpus()
  const packages: Array<PackageReport> = []
  for (const entry of PACKAGES) packages.push(await probePackage(entry, gpus.length > 0))
  const nixlReady = packages.some((p) => p.transports.includes("nixl") && p.state === "ready")
  return {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    gpus,
    core: manifestOf("@tensorlane/core"),
    packages,
    ucx: nixlReady ? await probeUcx() : undefined,
  }
}

const pad = (s: string, n: number): string => s.padEnd(n)

export const formatDoctor = (report: DoctorReport): string => {
  const lines: Array<string> = []
  lines.push(`node ${report.node} (${report.platform}); NVIDIA GPUs: ${report.gpus.length > 0 ? report.gpus.join(", ") : "none (/proc/driver/nvidia/gpus absent or empty)"}`)
  lines.push(
    report.core !== undefined
      ? `@tensorlane/core ${report.core.version} at ${report.core.location}`
      : "@tensorlane/core: not installed (npm install @tensorlane/core)",
  )
  lines.push("")
  lines.push(`${pad("transport", 14)}${pad("state", 17)}package`)
  lines.push(`${pad("object-store", 14)}${pad(report.core !== undefined ? "ready" : "not installed", 17)}@tensorlane/core (built in)`)
  for (const p of report.packages) {
    const where = p.version !== undefined ? ` ${p.version} at ${p.location}` : ""
    lines.push(`${pad(p.transports.join(", "), 14)}${pad(p.state, 17)}${p.packageName}${where}${p.gpuOnly ? " (GPU only)" : ""}`)
    for (const [label, value] of p.details) lines.push(`    ${label}: ${value}`)
    if (p.reason !== undefined) lines.push(`    why: ${p.reason}`)
    if (p.tried !== undefined) {
      lines.push("    tried:")
      for (const path of p.tried) lines.push(`      ${path}`)
    }
    if (p.fix !== undefined) lines.push(`    fix: ${p.fix}`)
  }
  if (report.ucx !== undefined) {
    lines.push("")
    if ("error" in report.ucx) lines.push(`UCX (as NIXL loads it): ${report.ucx.error}`)
    else {
      const ucx = report.ucx
      lines.push(`UCX ${ucx.version ?? "(version not reported)"} as NIXL loads it, from ${ucx.library ?? "(location not reported)"}`)
      lines.push(`  ${pad("transport", 12)}${pad("component", 12)}devices`)
      for (const t of ucx.transports) {
        lines.push(`  ${pad(t.transport, 12)}${pad(t.component, 12)}${t.enabled ? t.devices.join(", ") : "(disabled)"}`)
      }
      if (ucx.transports.length === 0) lines.push("  (UCX listed no transports: is UCX_TLS restricting them?)")
      for (const m of ucx.unloadedModules) lines.push(`  module ${m.module} not loaded: ${m.reason}`)
      const env = Object.entries(process.env).filter(([key]) => key.startsWith("UCX_") || key.startsWith("NIXL_"))
      if (env.length > 0) lines.push(`  environment: ${env.map(([k, v]) => `${k}=${v}`).join(" ")}`)
    }
  }
  return lines.join("\n")
}
