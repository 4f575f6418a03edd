/**
 * The GPU checks by name, and the program that runs one of them in a process of its own:
 * `node tools/gpu/check.js <name> <result file>` (runner.ts starts it). A check records what it
 * saw in `facts` as it goes; it passes when it returns, is skipped when it returns `{ skip }`, and
 * fails when it throws. The result file then holds the status, the facts recorded so far and the
 * error; no result file at all (a crash, a kill) is the runner's to report.
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

export type Facts = Record<string, unknown>

export type Check = (facts: Facts) => Promise<void | { readonly skip: string }>

export interface CheckSpec {
  /** Needs a GPU: skipped without one (and in a dry run). */
  readonly gpu: boolean
  /** The child process is killed, with every process it started, after this long. */
  readonly limitMs: number
  readonly load: () => Promise<Check>
}

export interface CheckResult {
  readonly status: "pass" | "fail" | "skip"
  readonly facts: Facts
  readonly reason?: string
  readonly error?: { readonly message: string; readonly tag?: string; readonly stack?: string }
}

/** In the order they run: what the later ones build on comes first. */
export const CHECKS: Readonly<Record<string, CheckSpec>> = {
  runtime: { gpu: false, limitMs: 60_000, load: async () => (await import("./checks/runtime.js")).runtime },
  libraries: { gpu: true, limitMs: 30_000, load: async () => (await import("./checks/libraries.js")).libraries },
  "cuda-tensors": { gpu: true, limitMs: 60_000, load: async () => (await import("./checks/cudaTensors.js")).cudaTensors },
  "nccl-one-rank": { gpu: true, limitMs: 60_000, load: async () => (await import("./checks/ncclSolo.js")).oneRank },
  "nccl-pools": { gpu: true, limitMs: 60_000, load: async () => (await import("./checks/ncclSolo.js")).pools },
  "nccl-two-processes": { gpu: true, limitMs: 90_000, load: async () => (await import("./checks/ncclPair.js")).twoProcesses },
  "nvshmem-one-pe": { gpu: true, limitMs: 90_000, load: async () => (await import("./checks/symmetric.js")).nvshmemOnePe },
  "nccl-window-one-rank": { gpu: true, limitMs: 90_000, load: async () => (await import("./checks/symmetric.js")).ncclWindowOneRank },
  bandwidth: { gpu: true, limitMs: 90_000, load: async () => (await import("./checks/bandwidth.js")).bandwidth },
  "nixl-vram": { gpu: true, limitMs: 90_000, load: async () => (await import("./checks/nixlVram.js")).nixlVram },
}

const describeError = (error: unknown): NonNullable<CheckResult["error"]> => {
  if (!(error instanceof Error)) return { message: String(error) }
  const tag = (error as { _tag?: unknown })._tag
  return { message: error.message, stack: error.stack, ...(typeof tag === "string" ? { tag } : {}) }
}

/** Runs check `name`; never throws (its failure is the result). */
export const runCheck = async (name: string): Promise<CheckResult> => {
  const facts: Facts = {}
  const spec = CHECKS[name]
  if (spec === undefined) return { status: "fail", facts, error: { message: `no check named "${name}"; known: ${Object.keys(CHECKS).join(", ")}` } }
  try {
    const outcome = await (await spec.load())(facts)
    return outcome === undefined ? { status: "pass", facts } : { status: "skip", facts, reason: outcome.skip }
  } catch (error) {
    return { status: "fail", facts, error: describeError(error) }
  }
}

const replacer = (_key: string, value: unknown) => (typeof value === "bigint" ? `0x${value.toString(16)}` : value)

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [name, resultFile] = process.argv.slice(2)
  const result = await runCheck(name)
  fs.writeFileSync(resultFile, JSON.stringify(result, replacer))
  // Transports keep threads and handles (NCCL's proxy, NIXL's progress thread): the result is written, so end here.
  process.exit(0)
}
