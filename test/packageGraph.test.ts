/**
 * The package graph stays clean: no published package ships or imports a benchmark or the CLI
 * (the benchmarks live in the private workspace tools/bench), and no module of packages/*\/src
 * imports itself through others, type-only imports included.
 */
import * as fs from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("..", import.meta.url))
const packagesDir = join(root, "packages")

interface Manifest {
  readonly name: string
  readonly private?: boolean
  readonly files?: ReadonlyArray<string>
  readonly exports?: Readonly<Record<string, unknown>>
}

// packages/platforms holds the prebuilt addons' packages, which have no sources to check.
const packages = fs
  .readdirSync(packagesDir)
  .filter((folder) => fs.existsSync(join(packagesDir, folder, "package.json")))
  .map((folder) => ({ folder, manifest: JSON.parse(fs.readFileSync(join(packagesDir, folder, "package.json"), "utf8")) as Manifest }))
const folderOf = new Map(packages.map((p) => [p.manifest.name, p.folder]))

const sourcesOf = (folder: string): Array<string> =>
  fs
    .readdirSync(join(packagesDir, folder, "src"), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(packagesDir, folder, "src", name))

/** Every module a file imports or re-exports, statically or dynamically, by its specifier. */
const specifiersOf = (file: string): Array<string> => {
  const text = fs.readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;'"]*?\bfrom\s+"([^"]+)"|\bimport\(\s*"([^"]+)"/g)) {
    found.push(match[1] ?? match[2])
  }
  return found
}

/** The source file a specifier names, for this repository's modules; undefined for anything else. */
const resolveSpecifier = (from: string, specifier: string): string | undefined => {
  if (specifier.startsWith(".")) return join(dirname(from), specifier).replace(/\.js$/, ".ts")
  const match = /^(@tensorlane\/[^/]+)(?:\/(.+))?$/.exec(specifier)
  const folder = match === null ? undefined : folderOf.get(match[1])
  if (folder === undefined) return undefined
  return join(packagesDir, folder, "src", `${match![2] ?? "index"}.ts`)
}

describe("the package graph", () => {
  it("no published package ships a benchmark, exports one or imports the CLI or a bench file", () => {
    for (const { folder, manifest } of packages.filter((p) => p.manifest.private !== true)) {
      expect(manifest.files ?? [], `${manifest.name} publishes bench/`).not.toContain("bench")
      expect(Object.keys(manifest.exports ?? {}).filter((path) => path.includes("bench")), `${manifest.name} exports a bench file`).toEqual([])
      for (const file of sourcesOf(folder)) {
        for (const specifier of specifiersOf(file)) {
          const where = `${relative(root, file)} imports ${specifier}`
          if (manifest.name !== "@tensorlane/cli") expect(specifier, where).not.toMatch(/^@tensorlane\/cli(\/|$)/)
          expect(specifier, where).not.toMatch(/(^|\/)bench(\/|$)|@tensorlane\/bench-tools/)
        }
      }
    }
  })

  it("has no import cycle among the modules of packages/*/src (type-only imports and package boundaries included)", () => {
    const edges = new Map<string, Array<string>>()
    for (const { folder } of packages) {
      for (const file of sourcesOf(folder)) {
        edges.set(file, specifiersOf(file).flatMap((s) => resolveSpecifier(file, s) ?? []))
      }
    }
    const cycles: Array<string> = []
    const state = new Map<string, "open" | "done">()
    const path: Array<string> = []
    const visit = (file: string): void => {
      state.set(file, "open")
      path.push(file)
      for (const target of edges.get(file) ?? []) {
        if (state.get(target) === "open") cycles.push([...path.slice(path.indexOf(target)), target].map((f) => relative(root, f)).join(" -> "))
        else if (state.get(target) === undefined) visit(target)
      }
      path.pop()
      state.set(file, "done")
    }
    for (const file of edges.keys()) if (state.get(file) === undefined) visit(file)
    expect(cycles).toEqual([])
    // Every edge was followed: a specifier resolved to no file would hide a cycle.
    for (const [file, targets] of edges) for (const target of targets) expect(edges.has(target), `${relative(root, file)} imports a missing ${relative(root, target)}`).toBe(true)
  })
})
