/** What the commands' parsers share: node's parseArgs with the usage on its errors, comma lists and whole numbers. */
import { type ParseArgsConfig, parseArgs } from "node:util"
import { UsageError } from "./Errors.js"

/** A UsageError whose message ends with the command's usage. */
export const usageError = (message: string, usage: string): UsageError => new UsageError({ message: `${message}\n${usage}` })

/** parseArgs on `args`, its errors (unknown option, missing value) turned into a UsageError. */
export const parseCommandLine = <const C extends Omit<ParseArgsConfig, "args">>(
  args: ReadonlyArray<string>,
  config: C,
  usage: string,
): ReturnType<typeof parseArgs<C & { args: Array<string> }>> => {
  try {
    return parseArgs({ ...config, args: [...args] })
  } catch (error) {
    throw usageError(error instanceof Error ? error.message : String(error), usage)
  }
}

/** `a, b,c` -> ["a", "b", "c"], empty items dropped; undefined stays undefined. */
export const list = (text: string | undefined): ReadonlyArray<string> | undefined =>
  text === undefined ? undefined : text.split(",").map((s) => s.trim()).filter((s) => s.length > 0)

/** The value of `--<name>`: a whole number >= min, else a UsageError. */
export const count = (name: string, text: string, min: number): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n < min) throw new UsageError({ message: `--${name} ${text}: a whole number >= ${min} is needed` })
  return n
}
