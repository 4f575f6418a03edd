/**
 * Loading the native addon of a transport package: the candidates tried in order (an environment
 * override, then cmake-js's Release and Debug outputs) and a NativeLibraryError that lists them all,
 * says why each failed and how to fix it. Transport packages load their addon on first use, so that
 * importing them never fails on a machine without their native library.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { NativeLibraryError } from "./Errors.js"

export interface NativeAddonSpec {
  /** The npm package that builds the addon (its package.json `name`). */
  readonly packageName: string
  /** `import.meta.url` of a module of that package (source or bundled). */
  readonly moduleUrl: string
  /** The addon's file name, e.g. `tensorlane_gloo.node`. */
  readonly file: string
  /** An environment variable that may name a prebuilt addon, tried first. */
  readonly overrideEnv: string
  /** What to run when the addon is missing or broken. */
  readonly fix: string
  /** A more precise diagnosis of load failures (a missing shared library, say); undefined to keep the default. */
  readonly explain?: (failures: ReadonlyArray<string>, tried: ReadonlyArray<string>) => NativeLibraryError | undefined
}

/** The folder of `packageName` that holds the module at `moduleUrl` (run from src/ in tests, bundled in dist/). */
export const packageRootOf = (moduleUrl: string, packageName: string): string => {
  const start = dirname(fileURLToPath(moduleUrl))
  for (let dir = start; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json")
    if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, "utf8")).name === packageName) return dir
    if (dirname(dir) === dir) return dirname(start)
  }
}

/** Where the addon may be, in the order tried. */
export const addonCandidates = (spec: NativeAddonSpec): ReadonlyArray<string> => {
  const root = packageRootOf(spec.moduleUrl, spec.packageName)
  const override = process.env[spec.overrideEnv]
  return [
    ...(override !== undefined && override !== "" ? [override] : []),
    join(root, "build", "Release", spec.file),
    join(root, "build", "Debug", spec.file),
  ]
}

/** Requires the first candidate that loads; NativeLibraryError naming every candidate otherwise. */
export const requireNativeAddon = <A>(spec: NativeAddonSpec): { readonly addon: A; readonly path: string } => {
  const tried = addonCandidates(spec)
  const require = createRequire(spec.moduleUrl)
  const failures: Array<string> = []
  for (const path of tried.filter((p) => fs.existsSync(p))) {
    try {
      return { addon: require(path) as A, path }
    } catch (error) {
      failures.push(`${path}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const explained = failures.length > 0 ? spec.explain?.(failures, tried) : undefined
  if (explained !== undefined) throw explained
  throw new NativeLibraryError({
    message:
      failures.length === 0
        ? `the ${spec.packageName} addon is not built: no ${spec.file} at ${tried.join(", ")}. Build it: ${spec.fix}`
        : `the ${spec.packageName} addon cannot be loaded: ${failures.join("; ")}. Rebuild it: ${spec.fix}`,
    library: spec.file,
    tried,
    fix: spec.fix,
  })
}
