/** Byte sizes as the command line writes them (4KiB, 64MiB) and as tables print them. */
import { UsageError } from "./Errors.js"

const UNITS: Readonly<Record<string, number>> = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }

/** "4KiB" -> 4096; a UsageError for anything else than a whole number and B, KiB, MiB or GiB. */
export const parseSize = (text: string): number => {
  const match = /^(\d+)\s*(B|KiB|MiB|GiB)$/.exec(text.trim())
  const bytes = match === null ? NaN : Number(match[1]) * UNITS[match[2]]
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new UsageError({ message: `size "${text}": write a positive whole number and a unit, like 4KiB, 64MiB (units: B, KiB, MiB, GiB)` })
  }
  // The scenario's tensor is float32: n bytes are n / 4 elements.
  if (bytes % 4 !== 0) throw new UsageError({ message: `size "${text}": the benchmark moves float32 tensors, so sizes are multiples of 4 bytes` })
  return bytes
}

export const parseSizes = (list: string): ReadonlyArray<number> => list.split(",").map(parseSize)

/** 4096 -> "4 KiB", the largest unit that divides the size. */
export const formatSize = (bytes: number): string => {
  for (const unit of ["GiB", "MiB", "KiB"]) if (bytes % UNITS[unit] === 0) return `${bytes / UNITS[unit]} ${unit}`
  return `${bytes} B`
}
