/**
 * Builds the GPU check bundle (README.md beside this file): Node from the npm registry
 * (fetch-node.sh, xz), and app.tar.xz holding the built packages with their addons, effect, the
 * check programs (transpiled, importing the packages as an install would), and a trimmed NIXL when
 * <repo>/.tools/libraries holds the wheel (tools/setup.sh unpacks it there); run.sh is its one
 * command. Build the packages and their addons first (tools/setup.sh).
 *   npx tsx tools/gpu/bundle.ts [--out <folder>]   build it (default <repo>/.gpu-bundle)
 *   npx tsx tools/gpu/bundle.ts --dry             build it in a temporary folder, check its size, start it here
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { basename, dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { CHECKOUT_LIBRARIES, type RuntimeWheel, wheelFolder } from "@tensorlane/core/native"
import { runtimeWheels as ncclWheels } from "@tensorlane/transport-nccl"
import { runtimeWheels as nixlWheels } from "@tensorlane/transport-nixl"
import { transformSync } from "esbuild"
import { REPORT_FILE, type Report } from "./runner.js"

const REPO = fileURLToPath(new URL("../..", import.meta.url))
const HERE = join(REPO, "tools", "gpu")

/** A device run carries at most 64 MiB, the working tree included: the bundle stays well below. */
export const SIZE_LIMIT = 48 * 2 ** 20

const MANIFEST = "manifest.json"
const PACKAGES = ["core", "transport-nccl", "symmetric-mem", "transport-nixl"]
/** Modules outside tools/gpu that the checks import. */
const SHARED_SOURCES = ["examples/nccl/actors.ts"]

/**
 * What NIXL's VRAM path loads: the C API, the UCX plugin, and UCX's CUDA and CMA modules; the
 * libraries they need from the wheel come along (grpc and etcd too: libnixl needs them).
 */
const NIXL_ROOTS = [
  ".nixl_cu12.mesonpy.libs/libnixl_capi.so",
  ".nixl_cu12.mesonpy.libs/plugins/libplugin_UCX.so",
  "nixl_cu12.libs/ucx/libuct_cuda.so.0.0.0",
  "nixl_cu12.libs/ucx/libucm_cuda.so.0.0.0",
  "nixl_cu12.libs/ucx/libuct_cma.so.0.0.0",
]
/** Where tools/setup.sh unpacked the wheel of that name. */
const unpacked = (wheels: ReadonlyArray<RuntimeWheel>, name: string): string => {
  const wheel = wheels.find((w) => w.name === name)
  if (wheel === undefined) throw new Error(`no package pins the ${name} wheel`)
  return join(REPO, CHECKOUT_LIBRARIES, wheelFolder(wheel))
}
/** UCX's CUDA memory hooks need CUDA 12's runtime (the device has 13's): the nccl cu12 wheel's, where their RUNPATH looks. */
const NIXL_CUDART = {
  from: join(unpacked(ncclWheels, "nvidia-cuda-runtime-cu12"), "nvidia", "cuda_runtime", "lib", "libcudart.so.12"),
  to: "nixl_cu12.libs/libcudart.so.12",
}

export interface BundleInfo {
  readonly dir: string
  readonly bytes: number
  readonly node: string
  readonly nixl: boolean
  /** Bytes of each file beside the manifest. */
  readonly files: Readonly<Record<string, number>>
}

const copyFile = (from: string, to: string): void => {
  fs.mkdirSync(dirname(to), { recursive: true })
  fs.copyFileSync(from, to)
}

const filesUnder = (dir: string): Array<string> =>
  fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => fs.statSync(join(dir, name)).isFile())

const stagePackages = (app: string): void => {
  for (const name of PACKAGES) {
    const from = join(REPO, "packages", name)
    const to = join(app, "node_modules", "@tensorlane", name)
    copyFile(join(from, "package.json"), join(to, "package.json"))
    const dist = filesUnder(join(from, "dist")).filter((f) => f.endsWith(".js"))
    if (dist.length === 0) throw new Error(`packages/${name}/dist holds no build: run npx tsup in packages/${name}`)
    for (const f of dist) copyFile(join(from, "dist", f), join(to, "dist", f))
    const release = join(from, "build", "Release")
    const addons = fs.existsSync(release) ? fs.readdirSync(release).filter((f) => f.endsWith(".node")) : []
    if (name !== "core" && addons.length === 0) throw new Error(`packages/${name} has no built addon: npm run build:native -w @tensorlane/${name}`)
    for (const f of addons) copyFile(join(release, f), join(to, "build", "Release", f))
  }
  const core = JSON.parse(fs.readFileSync(join(REPO, "packages", "core", "package.json"), "utf8")) as Manifest
  stageDependencies(app, [...Object.keys(core.dependencies ?? {}), ...Object.keys(core.peerDependencies ?? {})])
}

interface Manifest {
  readonly dependencies?: Readonly<Record<string, string>>
  readonly peerDependencies?: Readonly<Record<string, string>>
}

/** Core's run-time dependencies and theirs, from the repository's node_modules: their JavaScript and manifests. */
const stageDependencies = (app: string, roots: ReadonlyArray<string>): void => {
  const staged = new Set<string>()
  const pending = [...roots]
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (staged.has(name)) continue
    staged.add(name)
    const from = join(REPO, "node_modules", name)
    if (!fs.existsSync(join(from, "package.json"))) throw new Error(`${name}, a run-time dependency of @tensorlane/core, is not in node_modules: run npm install`)
    for (const f of filesUnder(from).filter((f) => /\.(c|m)?js$|(^|\/)package\.json$/.test(f))) copyFile(join(from, f), join(app, "node_modules", name, f))
    pending.push(...Object.keys((JSON.parse(fs.readFileSync(join(from, "package.json"), "utf8")) as Manifest).dependencies ?? {}))
  }
}

/** The check programs, at the same paths as in the repository so that their relative imports hold. */
const stageChecks = (app: string): void => {
  const own = filesUnder(HERE).map((f) => join("tools", "gpu", f))
  const sources = [...own.filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts") && basename(f) !== "bundle.ts"), ...SHARED_SOURCES]
  for (const source of sources) {
    const { code } = transformSync(fs.readFileSync(join(REPO, source), "utf8"), { loader: "ts", format: "esm", target: "node20", sourcefile: source })
    const to = join(app, source.replace(/\.ts$/, ".js"))
    fs.mkdirSync(dirname(to), { recursive: true })
    fs.writeFileSync(to, code)
  }
  for (const script of own.filter((f) => f.endsWith(".py"))) copyFile(join(REPO, script), join(app, script))
  fs.writeFileSync(join(app, "package.json"), `${JSON.stringify({ private: true, type: "module" })}\n`)
}

/** The ELF libraries `roots` need, found inside `wheel` (the rest come from the system). */
const closure = (wheel: string, roots: ReadonlyArray<string>): Array<string> => {
  const byName = new Map(filesUnder(wheel).map((f) => [basename(f), f]))
  const found = new Set<string>()
  const pending = [...roots]
  while (pending.length > 0) {
    const file = pending.pop()!
    if (found.has(file)) continue
    found.add(file)
    const dynamic = execFileSync("readelf", ["-d", join(wheel, file)], { encoding: "utf8" })
    for (const [, needed] of dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[(.+)\]/g)) {
      const inWheel = byName.get(needed)
      if (inWheel !== undefined) pending.push(inWheel)
    }
  }
  return [...found].sort()
}

/** NIXL's libraries for the VRAM check, when the wheel is installed here; false when it is not. */
const stageNixl = (app: string): boolean => {
  const wheel = unpacked(nixlWheels, "nixl-cu12")
  if (!fs.existsSync(join(wheel, NIXL_ROOTS[0])) || !fs.existsSync(NIXL_CUDART.from)) return false
  for (const file of closure(wheel, NIXL_ROOTS)) copyFile(join(wheel, file), join(app, "nixl", file))
  copyFile(NIXL_CUDART.from, join(app, "nixl", NIXL_CUDART.to))
  return true
}

/** The cached Node binary (fetch-node.sh downloads and compresses it the first time). */
export const nodeArchive = (): string => execFileSync("bash", [join(HERE, "fetch-node.sh")], { encoding: "utf8" }).trim().split("\n").pop()!

const refuseForeign = (out: string): void => {
  if (fs.existsSync(out) && !fs.existsSync(join(out, MANIFEST)) && fs.readdirSync(out).length > 0) {
    throw new Error(`${out} exists and holds no ${MANIFEST}: it is not a bundle, so it is left alone`)
  }
}

export const buildBundle = (out: string): BundleInfo => {
  refuseForeign(out)
  const node = nodeArchive()
  const staging = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-gpu-staging-"))
  try {
    const app = join(staging, "app")
    stagePackages(app)
    stageChecks(app)
    const nixl = stageNixl(app)
    fs.rmSync(out, { recursive: true, force: true })
    fs.mkdirSync(out, { recursive: true })
    execFileSync("tar", ["-C", staging, "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-I", "xz -T0 -6", "-cf", join(out, "app.tar.xz"), "app"])
    fs.copyFileSync(node, join(out, "node.xz"))
    fs.copyFileSync(join(HERE, "run.sh"), join(out, "run.sh"))
    const files = Object.fromEntries(fs.readdirSync(out).map((f) => [f, fs.statSync(join(out, f)).size]))
    const version = /node-(v[\d.]+)-linux-x64\.xz$/.exec(node)?.[1] ?? basename(node)
    const commit = execFileSync("git", ["-C", REPO, "rev-parse", "HEAD"], { encoding: "utf8" }).trim()
    fs.writeFileSync(join(out, MANIFEST), `${JSON.stringify({ node: version, nixl, commit, files }, null, 2)}\n`)
    const bytes = fs.readdirSync(out).reduce((sum, f) => sum + fs.statSync(join(out, f)).size, 0)
    const info: BundleInfo = { dir: out, bytes, node: version, nixl, files }
    if (bytes > SIZE_LIMIT) throw new Error(`the bundle is ${bytes} bytes, over its limit of ${SIZE_LIMIT}`)
    return info
  } finally {
    fs.rmSync(staging, { recursive: true, force: true })
  }
}

export interface DryRun {
  /** run.sh's exit code: 0 when no check failed. */
  readonly status: number | null
  /** stdout and stderr together. */
  readonly output: string
  readonly report: Report | undefined
}

/** Starts the bundle here with --dry: Node from the bundle, the runner, the checks that need no GPU. */
export const startDry = (bundle: string): DryRun => {
  const out = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-gpu-out-"))
  try {
    const run = spawnSync("bash", [join(bundle, "run.sh"), "--dry"], { env: { ...process.env, OUT: out }, encoding: "utf8", timeout: 120_000 })
    const reportFile = join(out, REPORT_FILE)
    const report = fs.existsSync(reportFile) ? (JSON.parse(fs.readFileSync(reportFile, "utf8")) as Report) : undefined
    return { status: run.status, output: `${run.stdout}${run.stderr}`, report }
  } finally {
    fs.rmSync(out, { recursive: true, force: true })
  }
}

const main = (): void => {
  const { values } = parseArgs({ options: { out: { type: "string" }, dry: { type: "boolean", default: false } } })
  if (values.dry) {
    const dir = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-gpu-bundle-"))
    try {
      const info = buildBundle(dir)
      console.log(`bundle: ${(info.bytes / 2 ** 20).toFixed(1)} MiB of ${SIZE_LIMIT / 2 ** 20} (${JSON.stringify(info.files)}), node ${info.node}, nixl ${info.nixl}`)
      const { status, output, report } = startDry(dir)
      process.stdout.write(output)
      if (status !== 0 || report === undefined || report.gpu) throw new Error(`the dry run should pass and report no GPU: exit code ${status}, ${JSON.stringify(report?.summary)}`)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
    return
  }
  const info = buildBundle(values.out ?? join(REPO, ".gpu-bundle"))
  console.log(`bundle in ${info.dir}: ${(info.bytes / 2 ** 20).toFixed(1)} MiB, node ${info.node}, nixl ${info.nixl}; run: bash ${relative(process.cwd(), join(info.dir, "run.sh"))}`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main()
