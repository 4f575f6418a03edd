/**
 * The GPU check's runner (run.sh starts it from the unpacked bundle): describes the machine, points
 * the loaders at the NVIDIA libraries of python3's wheels, runs every check of check.ts in a process
 * of its own (killed with whatever it started when its time is up, or when the run's is), writes
 * the JSON report and a log under --out, and prints one summary line. Without a GPU, or with --dry,
 * only the checks that need none run and the rest are skipped. Exit code 1 when a check failed.
 *   node tools/gpu/runner.js --out <folder> [--dry] [--only name,name] [--limit-s seconds]
 */
import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs, promisify } from "node:util"
import { CHECKS, type CheckResult } from "./check.js"
import { LIBRARIES_ENV, type WheelLibraries, findWheelLibraries, loaderOverrides } from "./wheelLibraries.js"

export const REPORT_FILE = "gpu-check.json"
export const LOG_FILE = "gpu-check.log"

/** Output kept per check for the report (the log holds all of it up to LOG_LIMIT). */
const TAIL_BYTES = 4096
const LOG_LIMIT = 8 * 2 ** 20
/** How long a check's processes get to exit after it wrote its result, before they count as left behind. */
const EXIT_GRACE_MS = 3_000

const CHECK_PROGRAM = fileURLToPath(new URL("./check.js", import.meta.url))
const APP = fileURLToPath(new URL("../..", import.meta.url))
/** The trimmed NIXL bundle.ts packs beside the app, if any. */
const NIXL_LIBRARIES = join(APP, "nixl", ".nixl_cu12.mesonpy.libs")

export interface Outcome extends CheckResult {
  readonly name: string
  readonly ms: number
  readonly exit?: { readonly code: number | null; readonly signal: string | null }
  readonly outputTail?: string
}

export interface Report {
  readonly tool: "tensorlane-gpu-check"
  readonly startedAt: string
  readonly ms: number
  readonly dry: boolean
  readonly gpu: boolean
  readonly host: { readonly node: string; readonly arch: string; readonly kernel: string; readonly nvidiaSmi: string; readonly wheels: WheelLibraries }
  readonly env: Readonly<Record<string, string>>
  readonly summary: { readonly passed: number; readonly failed: number; readonly skipped: number }
  readonly checks: ReadonlyArray<Outcome>
}

const run = promisify(execFile)

const nvidiaSmi = async (): Promise<string> => {
  try {
    const { stdout } = await run("nvidia-smi", ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], { timeout: 15_000 })
    return stdout.trim()
  } catch (error) {
    return `unavailable: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`
  }
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch {
    return false
  }
}

const killGroup = (pgid: number): void => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // Gone already.
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Runs one check in its own process group: its actors die with it on a kill. */
const runCheck = async (name: string, limitMs: number, env: NodeJS.ProcessEnv, scratch: string, log: (chunk: Buffer) => void): Promise<Outcome> => {
  const started = Date.now()
  const resultFile = join(scratch, `${name}.json`)
  const child = spawn(process.execPath, [CHECK_PROGRAM, name, resultFile], { cwd: APP, env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  let tail = ""
  const collect = (chunk: Buffer) => {
    log(chunk)
    tail = (tail + chunk.toString("utf8")).slice(-TAIL_BYTES)
  }
  child.stdout.on("data", collect)
  child.stderr.on("data", collect)
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    killGroup(child.pid!)
  }, limitMs)
  const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once("error", (error) => resolve({ code: null, signal: error.message }))
    child.once("close", (code, signal) => resolve({ code, signal }))
  })
  clearTimeout(timer)
  const graceEnd = Date.now() + EXIT_GRACE_MS
  while (groupAlive(child.pid!) && Date.now() < graceEnd) await sleep(50)
  const leftBehind = groupAlive(child.pid!)
  killGroup(child.pid!)
  const ms = Date.now() - started
  let result: CheckResult
  try {
    result = JSON.parse(fs.readFileSync(resultFile, "utf8")) as CheckResult
  } catch {
    const why = timedOut ? `no result within its limit of ${limitMs} ms: killed` : `its process ended (code ${exit.code}, signal ${exit.signal}) without a result`
    return { name, status: "fail", facts: {}, error: { message: why }, ms, exit, outputTail: tail }
  }
  if (leftBehind && result.status !== "fail") {
    result = { ...result, status: "fail", error: { message: `processes it started were still running ${EXIT_GRACE_MS} ms after it ended` } }
  }
  return { name, ...result, ms, exit, ...(result.status === "fail" ? { outputTail: tail } : {}) }
}

const summaryLine = (report: Report, out: string): string => {
  const { passed, failed, skipped } = report.summary
  const where = report.gpu ? report.host.nvidiaSmi : `no GPU${report.dry ? " (dry run)" : ""}`
  const failing = report.checks.filter((c) => c.status === "fail").map((c) => c.name)
  return `tensorlane gpu check: ${passed} passed, ${failed} failed${failing.length > 0 ? ` (${failing.join(", ")})` : ""}, ${skipped} skipped; ${where}; ${(report.ms / 1000).toFixed(1)} s; report ${join(out, REPORT_FILE)}`
}

export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  const { values } = parseArgs({
    args: [...argv],
    options: { out: { type: "string" }, dry: { type: "boolean", default: false }, only: { type: "string" }, "limit-s": { type: "string", default: "330" } },
  })
  const out = values.out ?? join(process.cwd(), "gpu-check-out")
  const only = values.only === undefined ? undefined : new Set(values.only.split(","))
  const unknown = [...(only ?? [])].filter((name) => CHECKS[name] === undefined)
  if (unknown.length > 0) throw new Error(`no check named ${unknown.join(", ")}; known: ${Object.keys(CHECKS).join(", ")}`)
  const started = Date.now()
  const deadline = started + Number(values["limit-s"]) * 1000
  fs.mkdirSync(out, { recursive: true })
  const scratch = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-gpu-check-"))
  const log = fs.createWriteStream(join(out, LOG_FILE))
  let logged = 0
  const write = (chunk: Buffer) => {
    logged += chunk.length
    if (logged <= LOG_LIMIT) log.write(chunk)
  }

  const smi = await nvidiaSmi()
  const gpu = !values.dry && (fs.existsSync("/dev/nvidia0") || !smi.startsWith("unavailable"))
  const wheels = findWheelLibraries()
  const overrides: Record<string, string> = {
    ...loaderOverrides(wheels),
    ...(fs.existsSync(NIXL_LIBRARIES) ? { NIXL_LIB_DIR: NIXL_LIBRARIES } : {}),
    NCCL_SOCKET_IFNAME: "lo",
    NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME: "lo",
  }
  const env = { ...process.env, ...overrides, [LIBRARIES_ENV]: JSON.stringify(wheels) }

  const checks: Array<Outcome> = []
  try {
    for (const [name, spec] of Object.entries(CHECKS)) {
      if (only !== undefined && !only.has(name)) continue
      const remaining = deadline - Date.now()
      if (spec.gpu && !gpu) {
        checks.push({ name, status: "skip", reason: values.dry ? "dry run" : "no GPU", facts: {}, ms: 0 })
      } else if (remaining < 5_000) {
        checks.push({ name, status: "skip", reason: "the run's time limit was reached", facts: {}, ms: 0 })
      } else {
        write(Buffer.from(`\n===== ${name}\n`))
        const outcome = await runCheck(name, Math.min(spec.limitMs, remaining), env, scratch, write)
        checks.push(outcome)
        const why = outcome.error?.message ?? outcome.reason
        process.stdout.write(`${outcome.status} ${name} (${outcome.ms} ms)${why === undefined ? "" : `: ${why.split("\n")[0].slice(0, 400)}`}\n`)
      }
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
    await new Promise((resolve) => log.end(resolve))
  }
  const count = (status: CheckResult["status"]) => checks.filter((c) => c.status === status).length
  const report: Report = {
    tool: "tensorlane-gpu-check",
    startedAt: new Date(started).toISOString(),
    ms: Date.now() - started,
    dry: values.dry,
    gpu,
    host: { node: process.version, arch: process.arch, kernel: os.release(), nvidiaSmi: smi, wheels },
    env: overrides,
    summary: { passed: count("pass"), failed: count("fail"), skipped: count("skip") },
    checks,
  }
  fs.writeFileSync(join(out, REPORT_FILE), `${JSON.stringify(report, null, 2)}\n`)
  process.stdout.write(`${summaryLine(report, out)}\n`)
  return report.summary.failed > 0 ? 1 : 0
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2))
}
