/** Wheels made in the tests: zip archives written byte by byte, so that an entry can lie about its name, type or size. */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { join } from "node:path"
import * as zlib from "node:zlib"
import type { RuntimeWheel } from "@tensorlane/core/native"

export interface MadeEntry {
  readonly name: string
  readonly data?: Buffer
  /** The Unix mode, file type included (default: a regular file, 0o644). */
  readonly mode?: number
  /** The uncompressed size the archive declares (default: the data's). */
  readonly declaredBytes?: number
  /** The length of the entry's comment in the central directory (default: none). */
  readonly commentBytes?: number
}

export const makeWheel = (entries: ReadonlyArray<MadeEntry>): Buffer => {
  const locals: Array<Buffer> = []
  const central: Array<Buffer> = []
  let offset = 0
  for (const entry of entries) {
    const data = entry.data ?? Buffer.alloc(0)
    const body = zlib.deflateRawSync(data)
    const name = Buffer.from(entry.name)
    const crc = zlib.crc32(data)
    const bytes = entry.declaredBytes ?? data.length
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4)
    local.writeUInt16LE(8, 8)
    local.writeUInt32LE(crc, 14)
    local.writeUInt32LE(body.length, 18)
    local.writeUInt32LE(bytes, 22)
    local.writeUInt16LE(name.length, 26)
    const record = Buffer.alloc(46)
    record.writeUInt32LE(0x02014b50, 0)
    record.writeUInt16LE((3 << 8) | 20, 4)
    record.writeUInt16LE(20, 6)
    record.writeUInt16LE(8, 10)
    record.writeUInt32LE(crc, 16)
    record.writeUInt32LE(body.length, 20)
    record.writeUInt32LE(bytes, 24)
    record.writeUInt16LE(name.length, 28)
    record.writeUInt16LE(entry.commentBytes ?? 0, 32)
    record.writeUInt32LE(((entry.mode ?? 0o100644) << 16) >>> 0, 38)
    record.writeUInt32LE(offset, 42)
    locals.push(local, name, body)
    central.push(record, name, Buffer.alloc(entry.commentBytes ?? 0, 0x20))
    offset += local.length + name.length + body.length
  }
  const directory = Buffer.concat(central)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(entries.length, 8)
  end.writeUInt16LE(entries.length, 10)
  end.writeUInt32LE(directory.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, directory, end])
}

/** Writes the wheel into `folder` under its file name and returns its pin (the libraries: `libraries`). */
export const pinWheel = (folder: string, name: string, wheel: Buffer, libraries: ReadonlyArray<RegExp>): RuntimeWheel => {
  const file = `${name.replace(/-/g, "_")}-1.0-py3-none-any.whl`
  fs.writeFileSync(join(folder, file), wheel)
  return {
    name,
    version: "1.0",
    url: `https://files.example.org/packages/${file}`,
    bytes: wheel.length,
    sha256: createHash("sha256").update(wheel).digest("hex"),
    libraries,
  }
}
