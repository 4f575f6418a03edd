/**
 * `tensorlane doctor`: every transport package installed (found by the `"tensorlane"` field of its
 * package.json) with its state (ready, missing library with the paths tried and the fix, no GPU, an
 * error), the versions and locations of the packages and native libraries, and the UCX transports
 * NIXL sees.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import type { PackageStatus } from "@tensorlane/core/native"
import { discoverPackages, type TransportPackage } from "./Packages.js"
import { parseUcxLog, type UcxReport } from "./UcxReport.js"

export type TransportState = "ready" | "missing library" | "no GPU" | "error"

export interface PackageReport {
  readonly packageName: string
  /** The transport it registers; undefined when its `"tensorlane"` field is invalid. */
  readonly transport?: string
  readonly gpuOnly: boolean
  readonly state: TransportState
  readonly version: string
  readonly location: string
  /** What its field says it loads: shown while it is not ready. */
  readonly needs: ReadonlyArray<string>
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
  /** The node_modules folders searched for transport packages. */
  readonly searched: ReadonlyArray<string>
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

/** An export shaped like a transport of that name (core's TensorTransport, or a plain object written with Promises). */
const exportsTransport = (module: Record<string, unknown>, name: string): boolean =>
  Object.values(module).some(
    (value) => typeof value === "object" && value !== null && (value as { name?: unknown }).name === name && typeof (value as { capabilities?: unknown }).capabilities === "object",
  )

export const probePackage = async (found: TransportPackage, hasGpu: boolean): Promise<PackageReport> => {
  const { field } = found
  const gpuOnly = field.kind === "gpu"
  const needs = [...(field.addon !== undefined ? [field.addon] : []), ...(field.libraries ?? [])]
  const base = { packageName: found.packageName, transport: field.transport, gpuOnly, version: found.version, location: found.location, needs, details: [] }
  let status: unknown
  try {
    const module = (await import(found.entry)) as Record<string, unknown>
    if (field.status === undefined) {
      if (!exportsTransport(module, field.transport)) return { ...base, state: "error", reason: `${found.packageName} exports no transport named ${field.transport} (its "tensorlane" field)` }
      return { ...base, state: gpuOnly && !hasGpu ? "no GPU" : "ready", details: [["module", fileURLToPath(found.entry)]] }
    }
    const describe = module[field.status]
    if (typeof describe !== "function") {
      return { ...base, state: "error", reason: `${found.packageName} exports no ${field.status} function (its "tensorlane" field's status)` }
    }
    status = await describe()
  } catch (error) {
    const missing = asNativeLibraryError(error)
    if (missing !== undefined) return { ...base, state: "missing library", reason: missing.message, tried: missing.tried, fix: missing.fix }
    return { ...base, state: "error", reason: messageOf(error) }
  }
  if (!isPackageStatus(status)) return { ...base, state: "error", reason: `${field.status} returned no details (core's PackageStatus)` }
  return { ...base, state: gpuOnly && !hasGpu ? "no GPU" : "ready", details: status.details }
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
  const discovered = discoverPackages()
  const packages: Array<PackageReport> = []
  for (const found of discovered.packages) packages.push(await probePackage(found, gpus.length > 0))
  for (const bad of discovered.invalid) packages.push({ ...bad, gpuOnly: false, state: "error", needs: [], details: [] })
  const nixlReady = packages.some((p) => p.transport === "nixl" && p.state === "ready")
  return {
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    gpus,
    core: manifestOf("@tensorlane/core"),
    packages,
    searched: discovered.searched,
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
    lines.push(`${pad(p.transport ?? "?", 14)}${pad(p.state, 17)}${p.packageName} ${p.version} at ${p.location}${p.gpuOnly ? " (GPU only)" : ""}`)
    for (const [label, value] of p.details) lines.push(`    ${label}: ${value}`)
    if (p.reason !== undefined) lines.push(`    why: ${p.reason}`)
    if ((p.state === "missing library" || p.state === "error") && p.needs.length > 0) lines.push(`    needs: ${p.needs.join(", ")}`)
    if (p.tried !== undefined) {
      lines.push("    tried:")
      for (const path of p.tried) lines.push(`      ${path}`)
    }
    if (p.fix !== undefined) lines.push(`    fix: ${p.fix}`)
  }
  if (report.packages.length === 0) {
    lines.push(`(no transport package: none with a "tensorlane" field in ${report.searched.length > 0 ? report.searched.join(", ") : "any node_modules folder here"})`)
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
