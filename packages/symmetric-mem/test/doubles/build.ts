/** Builds the TEST DOUBLE of libcuda.so.1 (fakeCudaDriver.c) with the system C compiler into `dir`. */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"

export const buildFakeCudaDriver = (dir: string): string => {
  const library = join(dir, "fakeCudaDriver.so")
  execFileSync("cc", ["-shared", "-fPIC", "-Wall", "-Werror", "-o", library, new URL("fakeCudaDriver.c", import.meta.url).pathname])
  return library
}

/** The double's log ($FAKE_CUDA_LOG): each call as [pid, "name argument"]. */
export const fakeCudaCalls = (log: string): Array<[number, string]> =>
  fs
    .readFileSync(log, "utf8")
    .trim()
    .split("\n")
    .map((line: string) => {
      const [pid, ...call] = line.split(" ")
      return [Number(pid), call.join(" ")] as [number, string]
    })
