/**
 * `tensorlane install <nixl|nccl|nvshmem>`: downloads the wheels that the transport package pins
 * (https only), checks each file's size and sha256, and unpacks only the libraries its loader needs
 * and the licence files into `<root>/<name>-<version>/` (root: the user cache, where the loaders
 * look), without Python. Each wheel is unpacked in a temporary folder beside the target and renamed
 * into place, so a target folder is complete or absent; an installed wheel is not fetched again.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { basename, dirname, join } from "node:path"
import { Readable, Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import type { ReadableStream as WebReadableStream } from "node:stream/web"
import { type RuntimeWheel, wheelFolder } from "@tensorlane/core/native"
import { DiskFullError, DownloadError, PackageMissingError, UnsafeWheelError, UsageError, WheelHashError } from "./Errors.js"
import { WHEEL_LIMITS, type WheelLimits, extractWheelEntry, readWheelEntries } from "./Wheel.js"

/** What each target installs: the wheels that package exports as `runtimeWheels`. */
export const INSTALL_TARGETS: Readonly<Record<string, string>> = {
  nixl: "@tensorlane/transport-nixl",
  nccl: "@tensorlane/transport-nccl",
  nvshmem: "@tensorlane/symmetric-mem",
}

const MAX_REDIRECTS = 5

/** Written last into an unpacked wheel's folder: the folder is complete when it names the pinned sha256. */
const MARKER = ".tensorlane-wheel.json"

/** Licence and notice files of the wheel's metadata, unpacked with the libraries. */
const LICENCE = /^[^/]+\.dist-info\/(licenses\/.+|(LICEN[CS]E|COPYING|NOTICE)[^/]*)$/

export interface InstallOptions {
  /** Where wheels unpack: the user cache's libraries/ folder, or a checkout's .tools/libraries. */
  readonly root: string
  readonly limits?: WheelLimits
  /** How long the download may go without receiving a byte. */
  readonly idleTimeoutMs?: number
  /** A folder holding the wheel files (named as in their URLs), used instead of downloading them: for machines offline. */
  readonly from?: string
}

export interface InstalledWheel {
  readonly wheel: string
  readonly folder: string
  /** False when the folder held this wheel already (nothing was downloaded). */
  readonly fresh: boolean
  readonly downloadedBytes: number
  readonly files: number
  readonly unpackedBytes: number
}

interface Marker {
  readonly name: string
  readonly version: string
  readonly sha256: string
  readonly files: number
  readonly bytes: number
}

const readMarker = (folder: string): Marker | undefined => {
  try {
    return JSON.parse(fs.readFileSync(join(folder, MARKER), "utf8")) as Marker
  } catch {
    return undefined
  }
}

const label = (wheel: RuntimeWheel): string => `${wheel.name} ${wheel.version}`

/** The wheel's file name, the last segment of its URL. */
export const wheelFileName = (wheel: RuntimeWheel): string => decodeURIComponent(basename(new URL(wheel.url).pathname))

/** Temporary folders of the installs under way: removed when the process exits first (main.ts turns Ctrl-C and SIGTERM into an exit). */
const underWay = new Set<string>()
let exitHookAdded = false

const removeOnExit = (temp: string): void => {
  if (!exitHookAdded) {
    process.on("exit", () => {
      for (const dir of underWay) fs.rmSync(dir, { recursive: true, force: true })
    })
    exitHookAdded = true
  }
  underWay.add(temp)
}

const isDiskFull = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return code === "ENOSPC" || code === "EDQUOT"
}

/** Downloads the pinned file to `target`, refusing more bytes than pinned: DownloadError, WheelHashError, or the file system's error. */
const download = async (wheel: RuntimeWheel, target: string, idleTimeoutMs: number): Promise<void> => {
  const url = wheel.url
  const refuse = (message: string): DownloadError => new DownloadError({ message: `${label(wheel)}: ${message}`, url })
  if (new URL(url).protocol !== "https:") throw refuse(`${url} is not an https URL`)
  const abort = new AbortController()
  let idle: NodeJS.Timeout | undefined
  const arm = (): void => {
    clearTimeout(idle)
    idle = setTimeout(() => abort.abort(), idleTimeoutMs)
  }
  const failed = (error: unknown): DownloadError => {
    if (abort.signal.aborted) return refuse(`no data from ${url} for ${idleTimeoutMs} ms`)
    const cause = (error as { cause?: unknown }).cause
    return refuse(`downloading ${url} failed: ${error instanceof Error ? error.message : String(error)}${cause instanceof Error ? ` (${cause.message})` : ""}`)
  }
  arm()
  try {
    let response: Response
    let current = url
    // Redirects are followed here, each checked before it is requested: https only, at most MAX_REDIRECTS.
    for (let hop = 0; ; hop++) {
      try {
        response = await fetch(current, { signal: abort.signal, redirect: "manual" })
      } catch (error) {
        throw failed(error)
      }
      const location = response.headers.get("location")
      if (response.status < 300 || response.status >= 400 || location === null) break
      await response.body?.cancel()
      const next = new URL(location, current)
      if (next.protocol !== "https:") throw refuse(`${current} redirects to ${next.href}, which is not https`)
      if (hop === MAX_REDIRECTS) throw refuse(`${url} redirects more than ${MAX_REDIRECTS} times`)
      current = next.href
    }
    if (!response.ok || response.body === null) throw refuse(`${url} answered ${response.status} ${response.statusText}`)
    let bytes = 0
    const bound = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        arm()
        bytes += chunk.length
        if (bytes > wheel.bytes) return done(sizeMismatch(wheel, `more than ${wheel.bytes}`))
        done(null, chunk)
      },
    })
    try {
      await pipeline(Readable.fromWeb(response.body as WebReadableStream), bound, fs.createWriteStream(target, { flags: "wx" }))
    } catch (error) {
      if (error instanceof WheelHashError || (error as NodeJS.ErrnoException).syscall !== undefined) throw error
      throw failed(error)
    }
  } finally {
    clearTimeout(idle)
  }
}

const sizeMismatch = (wheel: RuntimeWheel, actual: string): WheelHashError =>
  new WheelHashError({ message: `${label(wheel)}: the file has ${actual} bytes, the pin says ${wheel.bytes}`, url: wheel.url, expected: String(wheel.bytes), actual })

/** WheelHashError unless the file at `file` has the pinned size and sha256. */
const verify = async (wheel: RuntimeWheel, file: string): Promise<void> => {
  const bytes = fs.statSync(file).size
  if (bytes !== wheel.bytes) throw sizeMismatch(wheel, String(bytes))
  const hash = createHash("sha256")
  await pipeline(fs.createReadStream(file), hash)
  const actual = hash.digest("hex")
  if (actual !== wheel.sha256) {
    throw new WheelHashError({ message: `${label(wheel)}: the sha256 of ${wheel.url} is ${actual}, the pin says ${wheel.sha256}`, url: wheel.url, expected: wheel.sha256, actual })
  }
}

/**
 * Unpacks the wheel file at `file` (already checked against its pin) into `staging`: every entry
 * checked first, then the libraries the pin names and the licence files. Returns the count and
 * bytes written.
 */
const unpack = async (wheel: RuntimeWheel, file: string, staging: string, limits: WheelLimits): Promise<{ files: number; bytes: number }> => {
  const name = label(wheel)
  const entries = readWheelEntries(file, name, limits)
  const chosen = entries.filter((e) => !e.directory && (wheel.libraries.some((re) => re.test(e.name)) || LICENCE.test(e.name)))
  const unmatched = wheel.libraries.filter((re) => !entries.some((e) => re.test(e.name)))
  if (unmatched.length > 0) {
    throw new UnsafeWheelError({ message: `${name}: no entry matches ${unmatched.join(", ")}: the wheel's layout is not the one pinned`, wheel: name })
  }
  const bytes = chosen.reduce((sum, e) => sum + e.bytes, 0)
  if (bytes > limits.totalBytes) throw new UnsafeWheelError({ message: `${name}: the libraries add up to ${bytes} bytes, more than the limit of ${limits.totalBytes}`, wheel: name })
  for (const entry of chosen) {
    const target = join(staging, entry.name)
    fs.mkdirSync(dirname(target), { recursive: true })
    await extractWheelEntry(file, name, entry, target)
  }
  return { files: chosen.length, bytes }
}

/**
 * Installs one wheel under `options.root`: nothing to do when its folder holds it already; else
 * download it (or copy it from `options.from`), check, unpack in a temporary folder and rename it into place (a folder left by an
 * interrupted or older install is replaced). DownloadError, WheelHashError, UnsafeWheelError or
 * DiskFullError otherwise, with nothing left behind but what was there before.
 */
export const installWheel = async (wheel: RuntimeWheel, options: InstallOptions): Promise<InstalledWheel> => {
  const folder = join(options.root, wheelFolder(wheel))
  const present = readMarker(folder)
  if (present?.sha256 === wheel.sha256) {
    return { wheel: label(wheel), folder, fresh: false, downloadedBytes: 0, files: present.files, unpackedBytes: present.bytes }
  }
  const source = options.from !== undefined ? join(options.from, wheelFileName(wheel)) : undefined
  if (source !== undefined && !fs.existsSync(source)) throw new UsageError({ message: `${label(wheel)}: no ${source}; download it from ${wheel.url}` })
  let temp: string | undefined
  try {
    fs.mkdirSync(options.root, { recursive: true })
    temp = fs.mkdtempSync(join(options.root, `.${wheelFolder(wheel)}.tmp-`))
    removeOnExit(temp)
    const file = join(temp, "wheel.whl")
    if (source !== undefined) fs.copyFileSync(source, file)
    else await download(wheel, file, options.idleTimeoutMs ?? 60_000)
    await verify(wheel, file)
    const staging = join(temp, "unpacked")
    fs.mkdirSync(staging)
    const { files, bytes } = await unpack(wheel, file, staging, options.limits ?? WHEEL_LIMITS)
    const marker: Marker = { name: wheel.name, version: wheel.version, sha256: wheel.sha256, files, bytes }
    fs.writeFileSync(join(staging, MARKER), `${JSON.stringify(marker, null, 2)}\n`)
    if (fs.existsSync(folder)) fs.renameSync(folder, join(temp, "replaced"))
    try {
      fs.renameSync(staging, folder)
    } catch (error) {
      // Another install of the same wheel finished first: its folder is as good as this one.
      if (readMarker(folder)?.sha256 !== wheel.sha256) throw error
    }
    return { wheel: label(wheel), folder, fresh: true, downloadedBytes: source === undefined ? wheel.bytes : 0, files, unpackedBytes: bytes }
  } catch (error) {
    if (isDiskFull(error)) {
      throw new DiskFullError({ message: `${label(wheel)}: no space left under ${options.root} (it needs about ${wheel.bytes} bytes for the download and as much again unpacked); free some, or set XDG_CACHE_HOME to a larger disk`, path: options.root })
    }
    throw error
  } finally {
    if (temp !== undefined) {
      fs.rmSync(temp, { recursive: true, force: true })
      underWay.delete(temp)
    }
  }
}

/** The wheels a target installs, from its package as Node resolves it from here; PackageMissingError when it does not. */
export const targetWheels = async (target: string): Promise<ReadonlyArray<RuntimeWheel>> => {
  const packageName = Object.hasOwn(INSTALL_TARGETS, target) ? INSTALL_TARGETS[target] : undefined
  if (packageName === undefined) throw new UsageError({ message: `tensorlane install ${target}: the targets are ${Object.keys(INSTALL_TARGETS).join(", ")}` })
  let module: { readonly runtimeWheels?: ReadonlyArray<RuntimeWheel> }
  try {
    module = (await import(packageName)) as typeof module
  } catch (error) {
    throw new PackageMissingError({
      message: `tensorlane install ${target} installs the libraries that ${packageName} pins, and ${packageName} cannot be imported (${error instanceof Error ? error.message : String(error)}): npm install ${packageName}`,
      packageName,
    })
  }
  if (module.runtimeWheels === undefined) throw new PackageMissingError({ message: `${packageName} exports no runtimeWheels: it is older than this command; update it`, packageName })
  return module.runtimeWheels
}
