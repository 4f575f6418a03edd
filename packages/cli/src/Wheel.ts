/**
 * Reading a wheel (a zip archive) without Python: its central directory, every entry checked
 * before anything is written (no path that leaves the target, no symlink, bounded sizes and
 * counts), and the chosen entries inflated with node:zlib, each checked against its declared size
 * and CRC-32 as it streams. Zip64 archives are refused: the pinned wheels are far below its limits.
 */
import * as fs from "node:fs"
import { Transform } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as zlib from "node:zlib"
import { UnsafeWheelError } from "./Errors.js"

export interface WheelLimits {
  /** Entries in the archive. */
  readonly entries: number
  /** Uncompressed bytes of one unpacked entry (libnccl.so.2 is 400 MB). */
  readonly entryBytes: number
  /** Uncompressed bytes of all unpacked entries together. */
  readonly totalBytes: number
}

export const WHEEL_LIMITS: WheelLimits = { entries: 20_000, entryBytes: 1 << 30, totalBytes: 2 ** 31 }

export interface WheelEntry {
  readonly name: string
  readonly directory: boolean
  /** Unix permission bits when the archive was made on Unix, else 0o644. */
  readonly mode: number
  readonly method: number
  readonly crc32: number
  readonly compressedBytes: number
  readonly bytes: number
  readonly localHeader: number
}

const EOCD = 0x06054b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50
/** A central directory record: 46 bytes and at most 1 KiB of name, extra field and comment (the pinned wheels use under 300). */
const MAX_RECORD_BYTES = 46 + 1024
const S_IFMT = 0o170000
const S_IFREG = 0o100000
const S_IFDIR = 0o040000

const readAt = (fd: number, position: number, length: number): Buffer => {
  const buffer = Buffer.alloc(length)
  let done = 0
  while (done < length) {
    const n = fs.readSync(fd, buffer, done, length - done, position + done)
    if (n === 0) break
    done += n
  }
  return buffer.subarray(0, done)
}

/** Why an entry name cannot be written under the target, or undefined when it can. */
const unsafeName = (name: string): string | undefined => {
  if (name.length === 0) return "an empty name"
  if (name.includes("\0")) return "a NUL byte in the name"
  if (name.includes("\\")) return "a backslash in the name"
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) return "an absolute path"
  const parts = name.replace(/\/$/, "").split("/")
  if (parts.some((p) => p === ".." || p === "." || p === "")) return "a '..', '.' or empty path segment"
  return undefined
}

/**
 * Every entry of the archive, each checked: UnsafeWheelError for a name that would leave the
 * target, a symlink or other special file, an encrypted entry, a compression other than stored or
 * deflate, an entry over `limits.entryBytes`, a duplicate name, more than `limits.entries` entries,
 * or a malformed directory.
 */
export const readWheelEntries = (path: string, wheel: string, limits: WheelLimits): ReadonlyArray<WheelEntry> => {
  const fail = (message: string, entry?: string): never => {
    throw new UnsafeWheelError({ message: `${wheel}: ${message}`, wheel, ...(entry !== undefined ? { entry } : {}) })
  }
  const fd = fs.openSync(path, "r")
  try {
    const size = fs.fstatSync(fd).size
    const tailLength = Math.min(size, 22 + 0xffff)
    const tail = readAt(fd, size - tailLength, tailLength)
    let at = -1
    for (let i = tail.length - 22; i >= 0; i--) {
      if (tail.readUInt32LE(i) === EOCD) {
        at = i
        break
      }
    }
    if (at < 0) return fail("not a zip archive (no end of central directory)")
    const count = tail.readUInt16LE(at + 10)
    const directoryBytes = tail.readUInt32LE(at + 12)
    const directoryOffset = tail.readUInt32LE(at + 16)
    if (count === 0xffff || directoryBytes === 0xffffffff || directoryOffset === 0xffffffff) return fail("a zip64 archive, which is not supported")
    if (count > limits.entries) return fail(`${count} entries, more than the limit of ${limits.entries}`)
    if (directoryBytes > count * MAX_RECORD_BYTES) return fail(`a central directory of ${directoryBytes} bytes for ${count} entries`)
    const directoryEnd = size - tailLength + at
    if (directoryOffset + directoryBytes > directoryEnd) return fail("the central directory runs past its end record")
    const directory = readAt(fd, directoryOffset, directoryBytes)
    const entries: Array<WheelEntry> = []
    const names = new Set<string>()
    let p = 0
    for (let i = 0; i < count; i++) {
      if (p + 46 > directory.length || directory.readUInt32LE(p) !== CENTRAL) return fail(`entry ${i} of the central directory is malformed`)
      const madeOnUnix = directory.readUInt8(p + 5) === 3
      const flags = directory.readUInt16LE(p + 8)
      const method = directory.readUInt16LE(p + 10)
      const crc32 = directory.readUInt32LE(p + 16)
      const compressedBytes = directory.readUInt32LE(p + 20)
      const bytes = directory.readUInt32LE(p + 24)
      const nameLength = directory.readUInt16LE(p + 28)
      const extraLength = directory.readUInt16LE(p + 30)
      const commentLength = directory.readUInt16LE(p + 32)
      const attributes = directory.readUInt32LE(p + 38)
      const localHeader = directory.readUInt32LE(p + 42)
      if (p + 46 + nameLength > directory.length) return fail(`entry ${i} of the central directory is malformed`)
      const name = directory.toString("utf8", p + 46, p + 46 + nameLength)
      p += 46 + nameLength + extraLength + commentLength
      const why = unsafeName(name)
      if (why !== undefined) return fail(`entry "${name}" has ${why}`, name)
      if (names.has(name)) return fail(`entry "${name}" appears twice`, name)
      names.add(name)
      const unixMode = madeOnUnix ? attributes >>> 16 : 0
      const type = unixMode & S_IFMT
      const directoryEntry = name.endsWith("/")
      if (type !== 0 && type !== S_IFREG && !(type === S_IFDIR && directoryEntry)) return fail(`entry "${name}" is a symlink or another special file`, name)
      if ((flags & 1) !== 0) return fail(`entry "${name}" is encrypted`, name)
      if (method !== 0 && method !== 8) return fail(`entry "${name}" uses compression method ${method} (only stored and deflate are read)`, name)
      if (bytes > limits.entryBytes) return fail(`entry "${name}" has ${bytes} bytes, more than the limit of ${limits.entryBytes}`, name)
      if (localHeader >= directoryOffset) return fail(`entry "${name}" starts past the archive's data`, name)
      const mode = (unixMode & 0o777) === 0 ? 0o644 : unixMode & 0o755
      entries.push({ name, directory: directoryEntry, mode, method, crc32, compressedBytes, bytes, localHeader })
    }
    return entries
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Writes one entry of the archive at `path` to `target` (a new file), inflating it; UnsafeWheelError
 * when it inflates to more or fewer bytes than declared, its CRC-32 differs, or its data would run
 * past the central directory (an entry overlapping another is read only within its own bounds).
 */
export const extractWheelEntry = async (path: string, wheel: string, entry: WheelEntry, target: string): Promise<void> => {
  const fail = (message: string): UnsafeWheelError => new UnsafeWheelError({ message: `${wheel}: entry "${entry.name}" ${message}`, wheel, entry: entry.name })
  const fd = fs.openSync(path, "r")
  let start: number
  try {
    const header = readAt(fd, entry.localHeader, 30)
    if (header.length < 30 || header.readUInt32LE(0) !== LOCAL) throw fail("has no local header")
    start = entry.localHeader + 30 + header.readUInt16LE(26) + header.readUInt16LE(28)
    if (start + entry.compressedBytes > fs.fstatSync(fd).size) throw fail("runs past the end of the archive")
  } finally {
    fs.closeSync(fd)
  }
  let written = 0
  let crc = 0
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      written += chunk.length
      if (written > entry.bytes) return done(fail(`inflates to more than its declared ${entry.bytes} bytes`))
      crc = zlib.crc32(chunk, crc)
      done(null, chunk)
    },
  })
  const source = entry.compressedBytes === 0 ? [] : fs.createReadStream(path, { start, end: start + entry.compressedBytes - 1 })
  const sink = fs.createWriteStream(target, { flags: "wx", mode: entry.mode })
  try {
    await (entry.method === 8 ? pipeline(source, zlib.createInflateRaw(), check, sink) : pipeline(source, check, sink))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (typeof code === "string" && code.startsWith("Z_")) throw fail(`does not inflate: ${(error as Error).message}`)
    throw error
  }
  if (written !== entry.bytes) throw fail(`inflates to ${written} bytes, not its declared ${entry.bytes}`)
  if (crc !== entry.crc32) throw fail("has a CRC-32 that differs from the one declared")
}
