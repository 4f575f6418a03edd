/**
 * Builds the test doubles of libnccl.so.2 and libcudart.so (fake_nccl.c, fake_cudart.c) with the
 * system C compiler into build/ beside them (ignored by git, like every build output; nothing in the
 * system's temporary folder outlives the tests), once per source version, and returns the environment
 * that makes transport-nccl load them instead of the real libraries.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"

const here = new URL(".", import.meta.url).pathname

const build = (source: string): string => {
  const code = fs.readFileSync(join(here, source))
  const dir = join(here, "build")
  fs.mkdirSync(dir, { recursive: true })
  const out = join(dir, `${source.replace(/\.c$/, "")}-${createHash("sha256").update(code).digest("hex").slice(0, 12)}.so`)
  if (!fs.existsSync(out)) {
    const temporary = `${out}.${process.pid}.tmp`
    execFileSync("cc", ["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", temporary, join(here, source), "-lpthread"])
    fs.renameSync(temporary, out)
  }
  return out
}

export interface Doubles {
  readonly nccl: string
  readonly cudart: string
  /** Environment that loads the doubles (TENSORLANE_NCCL_LIBRARY, TENSORLANE_CUDART_LIBRARY). */
  readonly env: Record<string, string>
}

export const buildDoubles = (): Doubles => {
  const nccl = build("fake_nccl.c")
  const cudart = build("fake_cudart.c")
  return { nccl, cudart, env: { TENSORLANE_NCCL_LIBRARY: nccl, TENSORLANE_CUDART_LIBRARY: cudart } }
}

/**
 * A folder of one test file's own for what the doubles write: call logs (`log(name)`, for
 * FAKE_NCCL_LOG) and the collective calls' turns (`env`: FAKE_NCCL_TURNS). `remove()` deletes it,
 * once every process that loaded the doubles has ended (each writes there until it does).
 */
export const doublesFolder = () => {
  const path = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-nccl-double-"))
  return {
    log: (name: string): string => join(path, `${name}.log`),
    env: { FAKE_NCCL_TURNS: join(path, "turns") },
    remove: (): void => fs.rmSync(path, { recursive: true, force: true }),
  }
}

/** The double's call log, one call per line. */
export const readLog = (path: string): Array<string> =>
  fs.existsSync(path) ? fs.readFileSync(path, "utf8").split("\n").filter((l) => l.length > 0) : []
