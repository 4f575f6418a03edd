/**
 * The transport packages `tensorlane doctor` and `tensorlane bench` know: every package installed
 * next to the command or to the user's project (the node_modules folders of their ancestors) whose
 * package.json has a `"tensorlane"` field, so that a third-party transport shows up without editing
 * the CLI. docs/custom-transport.md documents the field.
 */
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/** The `"tensorlane"` field of a transport package's package.json. */
export interface TensorlaneField {
  /** The transport the package registers, as `tensorTransport` and group backends name it. */
  readonly transport: string
  /** "gpu": needs an NVIDIA GPU (reported "no GPU" without one, left out of default benches); "cpu": runs without one. */
  readonly kind: "cpu" | "gpu"
  /**
   * A named export of the package: core's PackageStatus contract (it loads the native side, throws
   * NativeLibraryError when something cannot load, and returns `details`). Without it the package is
   * ready when it imports and exports the transport.
   */
  readonly status?: string
  /** The native addon it loads (`tensorlane_gloo.node`), shown while it is not ready. */
  readonly addon?: string
  /** The shared libraries its addon opens (`libnixl_capi.so`), shown while it is not ready. */
  readonly libraries?: ReadonlyArray<string>
}

export interface TransportPackage {
  readonly packageName: string
  readonly version: string
  /** The package's folder. */
  readonly location: string
  /** The URL of the module its `exports` (or `main`) names: what a program imports. */
  readonly entry: string
  readonly field: TensorlaneField
}

/** A package with a `"tensorlane"` field the doctor cannot use: reported, not skipped silently. */
export interface InvalidPackage {
  readonly packageName: string
  readonly version: string
  readonly location: string
  readonly reason: string
}

export interface Discovered {
  readonly packages: ReadonlyArray<TransportPackage>
  readonly invalid: ReadonlyArray<InvalidPackage>
  /** The node_modules folders looked in, in order. */
  readonly searched: ReadonlyArray<string>
}

interface Manifest {
  readonly name?: unknown
  readonly version?: unknown
  readonly exports?: unknown
  readonly main?: unknown
  readonly tensorlane?: unknown
}

const isStringArray = (value: unknown): value is ReadonlyArray<string> => Array.isArray(value) && value.every((v) => typeof v === "string")

/** The field, checked; a sentence that says what is wrong otherwise. */
export const parseField = (field: unknown): TensorlaneField | string => {
  if (typeof field !== "object" || field === null || Array.isArray(field)) return `"tensorlane" must be an object, not ${JSON.stringify(field)}`
  const { transport, kind, status, addon, libraries } = field as Record<string, unknown>
  if (typeof transport !== "string" || !/^[a-z][a-z0-9-]*$/.test(transport)) return `"tensorlane.transport" must be a transport name (lowercase), not ${JSON.stringify(transport)}`
  if (kind !== "cpu" && kind !== "gpu") return `"tensorlane.kind" must be "cpu" or "gpu", not ${JSON.stringify(kind)}`
  if (status !== undefined && (typeof status !== "string" || status.length === 0)) return `"tensorlane.status" must name an export, not ${JSON.stringify(status)}`
  if (addon !== undefined && typeof addon !== "string") return `"tensorlane.addon" must be a file name, not ${JSON.stringify(addon)}`
  if (libraries !== undefined && !isStringArray(libraries)) return `"tensorlane.libraries" must be an array of file names, not ${JSON.stringify(libraries)}`
  return {
    transport,
    kind,
    ...(status !== undefined ? { status } : {}),
    ...(addon !== undefined ? { addon } : {}),
    ...(libraries !== undefined ? { libraries } : {}),
  }
}

/** The target of an `exports` value for `import`, conditions in Node's order for an ESM import. */
const importTarget = (exports: unknown): string | undefined => {
  if (typeof exports === "string") return exports
  if (typeof exports !== "object" || exports === null || Array.isArray(exports)) return undefined
  const conditions = exports as Record<string, unknown>
  if ("." in conditions) return importTarget(conditions["."])
  for (const condition of ["import", "node", "default"]) if (condition in conditions) return importTarget(conditions[condition])
  return undefined
}

/** The main module of the package in `folder`, as `import(name)` would load it. */
const entryOf = (folder: string, manifest: Manifest): string => {
  const target = importTarget(manifest.exports) ?? (typeof manifest.main === "string" ? manifest.main : "index.js")
  return pathToFileURL(join(folder, target)).href
}

const ancestors = (start: string): Array<string> => {
  const out: Array<string> = []
  for (let dir = start; ; dir = dirname(dir)) {
    out.push(dir)
    if (dirname(dir) === dir) return out
  }
}

/** The package folders of a node_modules folder: `name` and `@scope/name` entries (links included). */
const packageFolders = (nodeModules: string): Array<string> => {
  const names = (dir: string): Array<string> => {
    try {
      return fs.readdirSync(dir).filter((name) => !name.startsWith("."))
    } catch {
      return []
    }
  }
  return names(nodeModules).flatMap((name) =>
    name.startsWith("@") ? names(join(nodeModules, name)).map((inner) => join(nodeModules, name, inner)) : [join(nodeModules, name)],
  )
}

const readManifest = (folder: string): Manifest | undefined => {
  try {
    return JSON.parse(fs.readFileSync(join(folder, "package.json"), "utf8")) as Manifest
  } catch {
    return undefined
  }
}

const cliFolder = fileURLToPath(new URL("..", import.meta.url))

/**
 * The transport packages in the node_modules folders of `roots` and their ancestors (the user's
 * project first, then the command's own install); a package found twice is the first one.
 */
export const discoverPackages = (roots: ReadonlyArray<string> = [process.cwd(), cliFolder]): Discovered => {
  const searched = [...new Set(roots.flatMap(ancestors).map((dir) => join(dir, "node_modules")))].filter((dir) => fs.existsSync(dir))
  const seen = new Set<string>()
  const packages: Array<TransportPackage> = []
  const invalid: Array<InvalidPackage> = []
  for (const nodeModules of searched) {
    for (const folder of packageFolders(nodeModules)) {
      const manifest = readManifest(folder)
      if (manifest?.tensorlane === undefined || typeof manifest.name !== "string" || seen.has(manifest.name)) continue
      seen.add(manifest.name)
      const location = fs.realpathSync(folder)
      const found = { packageName: manifest.name, version: typeof manifest.version === "string" ? manifest.version : "unknown", location }
      const field = parseField(manifest.tensorlane)
      if (typeof field === "string") invalid.push({ ...found, reason: field })
      else packages.push({ ...found, entry: entryOf(location, manifest), field })
    }
  }
  const byName = (a: { packageName: string }, b: { packageName: string }) => a.packageName.localeCompare(b.packageName)
  return { packages: packages.sort(byName), invalid: invalid.sort(byName), searched }
}
