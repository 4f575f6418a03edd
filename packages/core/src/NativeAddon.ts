/**
 * Loading the native addon of a package: the candidates tried in order (an environment override
 * alone; else the package's prebuilt platform package, the user cache's source build, and
 * cmake-js's Release and Debug outputs in a checkout) and a NativeLibraryError that lists them all,
 * says why each failed and how to fix it. Packages load their addon on first use (nativeAddon), so
 * that importing them never fails on a machine without their native library. The same for the
 * shared libraries those addons dlopen (libraryCandidates/loadNativeLibrary), fetched from their
 * pinned wheels by `npx tensorlane install`.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { tensorlaneCacheDir } from "./CacheDir.js"
import { NativeLibraryError } from "./Errors.js"
import { readSetting, textSetting } from "./Settings.js"

interface NativeAddonSpec {
  /** The npm package that builds the addon (its package.json `name`). */
  readonly packageName: string
  /** `import.meta.url` of a module of that package (source or bundled). */
  readonly moduleUrl: string
  /** The addon's file name, e.g. `tensorlane_gloo.node`. */
  readonly file: string
  /** An environment variable that may name a prebuilt addon: then the only candidate (an addon the user named is never silently replaced). */
  readonly overrideEnv: string
  /** What a source build needs besides cmake and a C++ compiler (Debian's libgloo-dev, say). */
  readonly buildNeeds?: string
  /** A more precise diagnosis of load failures (a missing shared library, say); undefined to keep the default. */
  readonly explain?: AddonOptions["explain"]
}

/** The folder of `packageName` that holds the module at `moduleUrl` (run from src/ in tests, bundled in dist/). */
const packageRootOf = (moduleUrl: string, packageName: string): string => {
  const start = dirname(fileURLToPath(moduleUrl))
  for (let dir = start; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json")
    if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, "utf8")).name === packageName) return dir
    if (dirname(dir) === dir) return dirname(start)
  }
}

interface AddonPackage {
  readonly root: string
  readonly version: string
  readonly optionalDependencies: Readonly<Record<string, string>>
}

const addonPackageOf = (spec: NativeAddonSpec): AddonPackage => {
  const root = packageRootOf(spec.moduleUrl, spec.packageName)
  const manifest = (() => {
    try {
      return JSON.parse(fs.readFileSync(join(root, "package.json"), "utf8")) as { version?: unknown; optionalDependencies?: unknown }
    } catch {
      return {}
    }
  })()
  return {
    root,
    version: typeof manifest.version === "string" ? manifest.version : "unversioned",
    optionalDependencies: typeof manifest.optionalDependencies === "object" && manifest.optionalDependencies !== null ? (manifest.optionalDependencies as Record<string, string>) : {},
  }
}

let tag: string | undefined

/** This machine as platform packages name it: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`. Asked once per process. */
const platformTag = (): string => {
  if (tag !== undefined) return tag
  if (process.platform !== "linux") return (tag = `${process.platform}-${process.arch}`)
  return (tag = `linux-${process.arch}-${libcOfThisProcess()}`)
}

/**
 * The C library Node runs on: the one mapped into this process (a fraction of a millisecond), else
 * what Node's report says (tens of milliseconds in a busy process: it walks the heap and handles).
 */
const libcOfThisProcess = (): "gnu" | "musl" => {
  let maps = ""
  try {
    maps = fs.readFileSync("/proc/self/maps", "utf8")
  } catch {
    // No /proc: the report below.
  }
  if (/\/ld-musl-[^/]+\.so\.1$/m.test(maps)) return "musl"
  // libc.so.6 since glibc 2.34, libc-2.31.so and the like before.
  if (/\/libc(-[\d.]+)?\.so(\.6)?$/m.test(maps)) return "gnu"
  // Node's report names the glibc it runs on; musl has none.
  const header = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header
  return header?.glibcVersionRuntime !== undefined ? "gnu" : "musl"
}

/** The prebuilt addon package of `packageName` for this machine (`@tensorlane/transport-gloo-linux-x64-gnu`). */
const platformPackageOf = (packageName: string): string => `${packageName}-${platformTag()}`

/**
 * Where `npx tensorlane build` puts a source build of `packageName` at `version` for this machine:
 * `<cache>/addons/<package name without @, / as ->@<version>/<platform>-<arch>`.
 */
export const sourceBuildDir = (packageName: string, version: string): string =>
  join(tensorlaneCacheDir(), "addons", `${packageName.replace(/^@/, "").replace("/", "-")}@${version}`, `${process.platform}-${process.arch}`)

/** The argument of `npx tensorlane build` for `packageName`: the short name of tensorlane's own packages, else the package name. */
const buildArgumentOf = (packageName: string): string => packageName.replace(/^@tensorlane\/(transport-)?/, "")

/** The repository that holds `root` when it is a checkout's package (packages/<dir> beside tools/setup.sh), else undefined. */
const checkoutOf = (root: string): string | undefined => {
  const repo = dirname(dirname(root))
  return !root.split("/").includes("node_modules") && fs.existsSync(join(repo, "tools", "setup.sh")) ? repo : undefined
}

const overrideOf = (spec: NativeAddonSpec): string | undefined =>
  readSetting(textSetting(spec.overrideEnv, `the path of a built ${spec.file}`))

interface Candidate {
  readonly path: string
  /** Why a candidate that is no file was not there ("not installed"); undefined for a plain path. */
  readonly absent?: string
}

/**
 * Where the addon may be, in the order tried: the override alone when set; else the platform
 * package (resolved from the package, as npm installs it beside it or in it), the user cache's
 * source build, and cmake-js's Release and Debug outputs (a checkout, or a build by hand).
 */
const addonCandidates = (spec: NativeAddonSpec): ReadonlyArray<Candidate> => {
  const override = overrideOf(spec)
  if (override !== undefined) return [{ path: override }]
  const pkg = addonPackageOf(spec)
  const out: Array<Candidate> = []
  const platformPackage = platformPackageOf(spec.packageName)
  if (platformPackage in pkg.optionalDependencies) {
    try {
      const manifest = createRequire(join(pkg.root, "package.json")).resolve(`${platformPackage}/package.json`)
      out.push({ path: join(dirname(manifest), spec.file) })
    } catch {
      out.push({ path: `${platformPackage}/${spec.file}`, absent: "not installed" })
    }
  }
  out.push({ path: join(sourceBuildDir(spec.packageName, pkg.version), spec.file) })
  out.push({ path: join(pkg.root, "build", "Release", spec.file) }, { path: join(pkg.root, "build", "Debug", spec.file) })
  return out
}

const describeCandidate = (candidate: Candidate): string => (candidate.absent !== undefined ? `${candidate.path} (${candidate.absent})` : candidate.path)

/**
 * The CLI as a fix names it: npx's `-p` runs the project's own @tensorlane/cli where it is installed
 * and fetches it where not, where a bare `npx tensorlane` would look for a package named "tensorlane".
 */
export const CLI_COMMAND = "npx -p @tensorlane/cli tensorlane"

/** What to run when no candidate loads: fixes that work where the package is installed, and the repository's own in a checkout. */
const fixOf = (spec: NativeAddonSpec): string => {
  const pkg = addonPackageOf(spec)
  const platformPackage = platformPackageOf(spec.packageName)
  const needs = `cmake and a C++ compiler${spec.buildNeeds !== undefined ? `, ${spec.buildNeeds}` : ""}`
  const build = `${CLI_COMMAND} build ${buildArgumentOf(spec.packageName)} (a source build into ${sourceBuildDir(spec.packageName, pkg.version)}; needs ${needs})`
  const fixes =
    platformPackage in pkg.optionalDependencies
      ? [`npm install ${platformPackage}@${pkg.optionalDependencies[platformPackage]} (the prebuilt addon for ${platformTag()})`, `or ${build}`]
      : [`no prebuilt addon for ${platformTag()}: ${build}`]
  const repo = checkoutOf(pkg.root)
  if (repo !== undefined) fixes.push(`or, in the repository ${repo}: bash tools/setup.sh`)
  return fixes.join(", ")
}

/** Requires the first candidate that loads; NativeLibraryError naming every candidate otherwise. */
const requireNativeAddon = <A>(spec: NativeAddonSpec): { readonly addon: A; readonly path: string } => {
  const candidates = addonCandidates(spec)
  const tried = candidates.map(describeCandidate)
  const require = createRequire(spec.moduleUrl)
  const failures: Array<string> = []
  for (const { path } of candidates.filter((c) => c.absent === undefined && fs.existsSync(c.path))) {
    try {
      return { addon: require(path) as A, path }
    } catch (error) {
      failures.push(`${path}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const fix = fixOf(spec)
  const explained = failures.length > 0 ? spec.explain?.(failures, tried, fix) : undefined
  if (explained !== undefined) throw explained
  const override = overrideOf(spec)
  throw new NativeLibraryError({
    message:
      failures.length > 0
        ? `the ${spec.packageName} addon cannot be loaded: ${failures.join("; ")}. Tried: ${tried.join(", ")}. Fix: ${fix}`
        : override !== undefined
          ? `${spec.overrideEnv} names ${override}, which does not exist: point it at a built ${spec.file}, or unset it to use the installed addon (${fix})`
          : `the ${spec.packageName} addon is not installed: no ${spec.file} at ${tried.join(", ")}. Fix: ${fix}`,
    library: spec.file,
    tried,
    fix,
  })
}

/** A package's addon: file `tensorlane_<name>.node`, override TENSORLANE_<NAME>_ADDON. */
export interface AddonOptions {
  readonly packageName: string
  /** `import.meta.url` of a module of that package. */
  readonly moduleUrl: string
  readonly name: string
  /** What a source build needs besides cmake and a C++ compiler, named by the fix (e.g. "libgloo-dev (sudo apt-get install libgloo-dev)"). */
  readonly buildNeeds?: string
  /**
   * A more precise diagnosis of load failures (a missing shared library, say), given what failed,
   * every candidate tried and the default fix; undefined to keep the default error.
   */
  readonly explain?: (failures: ReadonlyArray<string>, tried: ReadonlyArray<string>, fix: string) => NativeLibraryError | undefined
}

/** A package's addon, loaded on first use, once per thread. */
export interface NativeAddon<A> {
  /** Where it may be, in the order tried (a platform package that is not installed as "<name>/<file> (not installed)"). */
  readonly candidates: () => ReadonlyArray<string>
  /** The addon and the file it came from; NativeLibraryError when it cannot be loaded. */
  readonly load: () => { readonly addon: A; readonly path: string }
  /** The addon if this thread loaded it already; never loads it. */
  readonly loaded: () => A | undefined
}

export const nativeAddon = <A>(options: AddonOptions): NativeAddon<A> => {
  const spec: NativeAddonSpec = {
    packageName: options.packageName,
    moduleUrl: options.moduleUrl,
    file: `tensorlane_${options.name}.node`,
    overrideEnv: `TENSORLANE_${options.name.toUpperCase()}_ADDON`,
    ...(options.buildNeeds !== undefined ? { buildNeeds: options.buildNeeds } : {}),
    ...(options.explain !== undefined ? { explain: options.explain } : {}),
  }
  let loaded: { readonly addon: A; readonly path: string } | undefined
  return {
    candidates: () => addonCandidates(spec).map(describeCandidate),
    load: () => (loaded ??= requireNativeAddon<A>(spec)),
    loaded: () => loaded?.addon,
  }
}

/**
 * A wheel on PyPI, pinned by its file's URL, size and sha256: what `npx tensorlane install`
 * downloads and unpacks (only `libraries` and the licence files) into `<root>/<wheelFolder>`.
 */
export interface RuntimeWheel {
  /** The distribution's name on PyPI (`nixl-cu12`). */
  readonly name: string
  readonly version: string
  /** The wheel file's https URL. */
  readonly url: string
  readonly bytes: number
  readonly sha256: string
  /** The entries unpacked, besides the licence files: paths inside the wheel. */
  readonly libraries: ReadonlyArray<RegExp>
}

/** The folder a wheel unpacks to under an install root: `<name>-<version>`, the name as the wheel's file spells it. */
export const wheelFolder = (wheel: Pick<RuntimeWheel, "name" | "version">): string => `${wheel.name.replace(/[-.]/g, "_")}-${wheel.version}`

/** Where `npx tensorlane install` unpacks wheels: `<user cache>/libraries`. */
export const libraryCacheDir = (): string => join(tensorlaneCacheDir(), "libraries")

/** Where the checkout's setup (tools/setup.sh) unpacks them: `<repo>/.tools/libraries`. */
export const CHECKOUT_LIBRARIES = join(".tools", "libraries")

/**
 * A shared library a native addon dlopens at run time (NCCL, NIXL, NVSHMEM), shipped by a Python
 * wheel that `npx tensorlane install <install>` unpacks into the user cache.
 */
export interface NativeLibrarySpec {
  /** The library's file name, as errors name it (`libnccl.so.2`). */
  readonly library: string
  /** How the error introduces it (default: the file name), e.g. "NIXL's C API (libnixl_capi.so, from the nixl-cu12 wheel)". */
  readonly description?: string
  /** The package that loads it and `import.meta.url` of one of its modules: the search starts at that package. */
  readonly packageName: string
  readonly moduleUrl: string
  /**
   * An environment variable tried first: `folder` names a folder holding `library` (tried before
   * the others); `file` names the library itself and is then the only candidate (a library the
   * user named is never silently replaced).
   */
  readonly override: { readonly env: string; readonly names: "folder" | "file" }
  /** The argument of `npx tensorlane install` that fetches it (`nixl`). */
  readonly install: string
  /** The pinned wheel that holds it, and its path inside that wheel. */
  readonly wheel: RuntimeWheel
  readonly path: string
  /** Its paths in Python's site-packages: pip installs of this wheel or of a sibling build (cu13). */
  readonly sitePaths: ReadonlyArray<string>
  /** Names dlopen looks up on the system library path, tried last. */
  readonly systemNames: ReadonlyArray<string>
}

const ancestors = (start: string): Array<string> => {
  const out: Array<string> = []
  for (let dir = start; ; dir = dirname(dir)) {
    out.push(dir)
    if (dirname(dir) === dir) return out
  }
}

let sites: ReadonlyArray<string> | undefined

/** Site-packages folders of the python3 on PATH (a virtualenv's included); none without Python. Asked once per process. */
const sitePackages = (): ReadonlyArray<string> => {
  if (sites !== undefined) return sites
  try {
    const out = execFileSync("python3", ["-c", "import site; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))"], {
      encoding: "utf8",
      timeout: 10_000,
      stdio: ["ignore", "pipe", "ignore"],
    })
    sites = out.split("\n").filter((line) => line.length > 0)
  } catch {
    sites = []
  }
  return sites
}

const overrideSetting = (spec: NativeLibrarySpec) =>
  textSetting(spec.override.env, spec.override.names === "file" ? `the path of ${spec.library}` : `the folder that holds ${spec.library}`)

/** What to run: the install command, the checkout's setup when the package runs from one, the override. */
export const libraryFix = (spec: NativeLibrarySpec): string => {
  const repo = checkoutOf(packageRootOf(spec.moduleUrl, spec.packageName))
  const setup = repo !== undefined ? `, or, in the repository ${repo}: bash tools/setup.sh` : ""
  const override =
    spec.override.names === "file" ? `set ${spec.override.env} to the path of a ${spec.library}` : `point ${spec.override.env} at the folder that holds ${spec.library}`
  return `${CLI_COMMAND} install ${spec.install}${setup}, or ${override}`
}

/**
 * Where the library may be, in the order tried: the override; the user cache
 * (`npx tensorlane install`); <repo>/.tools/libraries in every ancestor of the package and of the
 * working directory (the checkout's setup); Python's site-packages; the system path (bare names, last).
 */
export const libraryCandidates = (spec: NativeLibrarySpec): ReadonlyArray<string> => [...candidatePaths(spec)]

/**
 * The candidates in order, each once, made as they are asked for: Python's site-packages (a python3
 * run, 100 ms) only when no earlier one did.
 */
function* candidatePaths(spec: NativeLibrarySpec): Generator<string> {
  const seen = new Set<string>()
  for (const path of allCandidatePaths(spec)) {
    if (seen.has(path)) continue
    seen.add(path)
    yield path
  }
}

function* allCandidatePaths(spec: NativeLibrarySpec): Generator<string> {
  const override = readSetting(overrideSetting(spec))
  if (override !== undefined && spec.override.names === "file") {
    yield override
    return
  }
  if (override !== undefined) yield join(override, spec.library)
  const inWheel = join(wheelFolder(spec.wheel), spec.path)
  yield join(libraryCacheDir(), inWheel)
  const roots = new Set([...ancestors(packageRootOf(spec.moduleUrl, spec.packageName)), ...ancestors(process.cwd())])
  for (const root of roots) yield join(root, CHECKOUT_LIBRARIES, inWheel)
  for (const site of sitePackages()) for (const path of spec.sitePaths) yield join(site, path)
  yield* spec.systemNames
}

/**
 * Calls `load` (the addon's dlopen) with each candidate until one succeeds; NativeLibraryError
 * naming every path tried, why each existing one failed, and the fix otherwise.
 */
export const loadNativeLibrary = <R>(spec: NativeLibrarySpec, load: (path: string) => R): { readonly loaded: R; readonly path: string } => {
  const candidates: Array<string> = []
  const failures: Array<string> = []
  for (const path of candidatePaths(spec)) {
    candidates.push(path)
    // Paths that do not exist are skipped without a dlopen; bare names go to the system's search.
    if (path.includes("/") && !fs.existsSync(path)) continue
    try {
      return { loaded: load(path), path }
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error))
    }
  }
  const fix = libraryFix(spec)
  throw new NativeLibraryError({
    message: `${spec.description ?? spec.library} cannot be loaded. Tried: ${candidates.join(", ")}${failures.length > 0 ? ` (${failures.join("; ")})` : ""}. Fix: ${fix}`,
    library: spec.library,
    tried: candidates,
    fix,
  })
}
