/**
 * `tensorlane build <transport>`: builds a transport's addon from the sources its package ships
 * (native/, CMakeLists.txt, and core's native-kit) into the per-user cache, where its loader looks
 * after the platform package: for a machine that no platform package covers, or a build of one's
 * own. cmake-js and node-addon-api are this package's dependencies; cmake, a C++ compiler and the
 * transport's system libraries are checked first, and each missing one is named with its fix.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { delimiter, dirname, join } from "node:path"
import { sourceBuildDir } from "@tensorlane/core/native"
import { BuildError, UsageError } from "./Errors.js"

/** The transports `tensorlane build` knows by their short name, and what each needs besides cmake and a compiler. */
const BUILDS: Readonly<Record<string, { readonly packageName: string; readonly headers: ReadonlyArray<{ readonly header: string; readonly fix: string }> }>> = {
  gloo: {
    packageName: "@tensorlane/transport-gloo",
    headers: [{ header: "gloo/config.h", fix: "Gloo's headers and library: sudo apt-get install libgloo-dev (Debian, Ubuntu)" }],
  },
  nixl: { packageName: "@tensorlane/transport-nixl", headers: [] },
  nccl: { packageName: "@tensorlane/transport-nccl", headers: [] },
  "symmetric-mem": { packageName: "@tensorlane/symmetric-mem", headers: [] },
}

/** The longest a build may take before it is stopped: a few addons' worth of compiling on a slow machine. */
const BUILD_TIMEOUT_MS = 15 * 60_000

export interface BuildResult {
  readonly packageName: string
  readonly version: string
  /** The folder the built addon(s) went to. */
  readonly dir: string
  readonly files: ReadonlyArray<string>
}

const onPath = (command: string): string | undefined =>
  (process.env.PATH ?? "")
    .split(delimiter)
    .filter((dir) => dir.length > 0)
    .map((dir) => join(dir, command))
    .find((file) => {
      try {
        fs.accessSync(file, fs.constants.X_OK)
        return true
      } catch {
        return false
      }
    })

/** The folder of `packageName` as a program in `cwd` imports it (node_modules of `cwd` and its ancestors). */
const installedPackage = (packageName: string, cwd: string): { readonly root: string; readonly version: string } | undefined => {
  for (let dir = cwd; ; dir = dirname(dir)) {
    const manifest = join(dir, "node_modules", packageName, "package.json")
    if (fs.existsSync(manifest)) {
      const root = fs.realpathSync(dirname(manifest))
      return { root, version: String((JSON.parse(fs.readFileSync(manifest, "utf8")) as { version?: unknown }).version) }
    }
    if (dirname(dir) === dir) return undefined
  }
}

/** What the build needs that this machine lacks, each with its fix; empty when all is there. */
const missingTools = (headers: ReadonlyArray<{ readonly header: string; readonly fix: string }>): ReadonlyArray<string> => {
  const missing: Array<string> = []
  if (onPath("cmake") === undefined) missing.push("cmake (3.16 or newer): sudo apt-get install cmake, or pip install cmake")
  const compilers = process.env.CXX !== undefined && process.env.CXX !== "" ? [process.env.CXX] : ["c++", "g++", "clang++"]
  if (!compilers.some((c) => (c.includes("/") ? fs.existsSync(c) : onPath(c) !== undefined))) {
    missing.push(`a C++17 compiler (${compilers.join(", ")} not found): sudo apt-get install g++, or set CXX`)
  }
  if (onPath("make") === undefined && onPath("ninja") === undefined) missing.push("make or ninja: sudo apt-get install make")
  const includeDirs = [...(process.env.CPATH ?? "").split(delimiter).filter((d) => d.length > 0), "/usr/local/include", "/usr/include"]
  for (const { header, fix } of headers) if (!includeDirs.some((dir) => fs.existsSync(join(dir, header)))) missing.push(`${header} (${fix})`)
  return missing
}

/** Runs cmake-js with its output on stderr; a BuildError with the exit status when it fails or runs past the limit. */
const cmakeJs = (args: ReadonlyArray<string>, cwd: string, what: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const cli = createRequire(import.meta.url).resolve("cmake-js/bin/cmake-js")
    const child = spawn(process.execPath, [cli, ...args], { cwd, stdio: ["ignore", process.stderr, process.stderr], timeout: BUILD_TIMEOUT_MS, killSignal: "SIGKILL" })
    child.on("error", (error) => reject(new BuildError({ message: `cmake-js could not be started for ${what}: ${error.message}`, missing: [] })))
    child.on("exit", (code, signal) => {
      if (code === 0) return resolve()
      const why = signal !== null ? `was stopped (${signal}${signal === "SIGKILL" ? `, past ${BUILD_TIMEOUT_MS / 60_000} minutes` : ""})` : `failed with exit status ${code}`
      reject(new BuildError({ message: `building ${what} ${why}; its output is above`, missing: [] }))
    })
  })

/**
 * Builds the addon of `transport` (a short name or a package name) for the package that a program in
 * `cwd` imports, into sourceBuildDir(package, version); returns where it went.
 */
export const runBuild = async (transport: string, cwd: string): Promise<BuildResult> => {
  const known = BUILDS[transport]
  if (known === undefined && !transport.startsWith("@")) {
    throw new UsageError({ message: `tensorlane build ${transport}: unknown transport; one of ${Object.keys(BUILDS).join(", ")}, or a package name` })
  }
  const packageName = known?.packageName ?? transport
  const installed = installedPackage(packageName, cwd)
  if (installed === undefined) {
    throw new BuildError({ message: `${packageName} is not installed where ${cwd} imports it from: npm install ${packageName}`, missing: [packageName] })
  }
  if (!fs.existsSync(join(installed.root, "CMakeLists.txt"))) {
    throw new BuildError({ message: `${packageName} at ${installed.root} ships no native sources (no CMakeLists.txt): it has no addon to build`, missing: [] })
  }
  const missing = missingTools(known?.headers ?? [])
  if (missing.length > 0) {
    throw new BuildError({ message: `building ${packageName} needs what this machine lacks:\n  ${missing.join("\n  ")}`, missing })
  }
  const dir = sourceBuildDir(packageName, installed.version)
  // cmake's work folder and the new addon stay beside the destination until the build succeeded,
  // so that a failed or concurrent build never leaves a half-written addon where the loader looks.
  let work: string
  try {
    fs.mkdirSync(dirname(dir), { recursive: true })
    work = fs.mkdtempSync(`${dir}.build-`)
  } catch (error) {
    throw new BuildError({ message: `cannot write the user cache at ${dirname(dir)} (set XDG_CACHE_HOME to a writable folder): ${(error as Error).message}`, missing: [] })
  }
  try {
    const nodeAddonApi = dirname(createRequire(import.meta.url).resolve("node-addon-api/package.json"))
    await cmakeJs(["compile", "--directory", installed.root, "--out", join(work, "build"), `--CDNODE_ADDON_API_DIR=${nodeAddonApi}`], installed.root, packageName)
    const release = join(work, "build", "Release")
    const files = fs.readdirSync(release).filter((f) => f.endsWith(".node"))
    if (files.length === 0) throw new BuildError({ message: `building ${packageName} made no .node file in ${release}`, missing: [] })
    const staged = join(work, "addon")
    fs.mkdirSync(staged)
    for (const file of files) fs.copyFileSync(join(release, file), join(staged, file))
    try {
      fs.rmSync(dir, { recursive: true, force: true })
      fs.renameSync(staged, dir)
    } catch (error) {
      throw new BuildError({ message: `the built addon could not replace ${dir} (another build finishing at the same time?): ${(error as Error).message}`, missing: [] })
    }
    return { packageName, version: installed.version, dir, files }
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
}
