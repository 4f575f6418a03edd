/**
 * What each published package puts in its tarball, as `npm pack --dry-run` lists it: a README with an
 * install section, the repository's LICENSE, package.json and what `files` names (every entry inside the
 * package and matching something), no test, every `exports` and `bin` target; and its manifest: real
 * peer ranges, `effect` a peer with one range everywhere, the repository's Node engines.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { isAbsolute, join, normalize } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { beforeAll, describe, expect, it } from "vitest"

const run = promisify(execFile)
const root = fileURLToPath(new URL("..", import.meta.url))
const npm = (...args: Array<string>) => run("npm", args, { cwd: root, timeout: 60_000, maxBuffer: 64 << 20 }).then((r) => JSON.parse(r.stdout) as unknown)

interface Manifest {
  readonly name: string
  readonly private?: boolean
  readonly files?: ReadonlyArray<string>
  readonly exports?: unknown
  readonly main?: string
  readonly bin?: string | Readonly<Record<string, string>>
  readonly engines?: { readonly node?: string }
  readonly dependencies?: Readonly<Record<string, string>>
  readonly peerDependencies?: Readonly<Record<string, string>>
}

interface Packed {
  readonly name: string
  readonly manifest: Manifest
  readonly folder: string
  readonly files: ReadonlyArray<string>
}

const rootManifest = JSON.parse(fs.readFileSync(join(root, "package.json"), "utf8")) as Manifest & { devDependencies: Record<string, string> }

/** Every string an `exports` value points at, conditions and subpaths included. */
const targetsOf = (exports: unknown): Array<string> =>
  typeof exports === "string" ? [exports] : typeof exports === "object" && exports !== null ? Object.values(exports).flatMap(targetsOf) : []

const binsOf = (bin: Manifest["bin"]): Array<string> => (bin === undefined ? [] : typeof bin === "string" ? [bin] : Object.values(bin))

/** A package path ("./dist/x.js", "dist/x.js") as npm lists it; a `*` pattern as a prefix test. */
const matches = (files: ReadonlyArray<string>, target: string): boolean => {
  const path = normalize(target).replace(/^\.\//, "")
  const star = path.indexOf("*")
  return star < 0 ? files.includes(path) : files.some((f) => f.startsWith(path.slice(0, star)) && f.endsWith(path.slice(star + 1)))
}

const ALWAYS = ["package.json", "README.md", "LICENSE"]

let packed: ReadonlyArray<Packed> = []

beforeAll(async () => {
  const workspaces = (await npm("query", ".workspace")) as ReadonlyArray<{ name: string; path: string; private?: boolean }>
  const published = workspaces.filter((w) => w.private !== true)
  const tarballs = (await npm("pack", "--dry-run", "--json", "--ignore-scripts", ...published.flatMap((w) => ["-w", w.name]))) as ReadonlyArray<{
    name: string
    files: ReadonlyArray<{ path: string }>
  }>
  packed = published.map((w) => ({
    name: w.name,
    folder: w.path,
    manifest: JSON.parse(fs.readFileSync(join(w.path, "package.json"), "utf8")) as Manifest,
    files: tarballs.find((t) => t.name === w.name)!.files.map((f) => f.path),
  }))
}, 120_000)

describe("the published packages", () => {
  it("are the packages/* workspaces (private ones left out)", () => {
    expect(packed.map((p) => p.name)).toEqual(expect.arrayContaining(["@tensorlane/core", "@tensorlane/cli", "@tensorlane/transport-gloo"]))
    for (const p of packed) expect(p.files.length, p.name).toBeGreaterThan(ALWAYS.length)
  })

  it("each holds README.md, the repository's LICENSE and package.json, and only what `files` names, nothing outside it, no test", () => {
    const license = fs.readFileSync(join(root, "LICENSE"), "utf8")
    for (const p of packed) {
      for (const name of ALWAYS) expect(p.files, `${p.name} packs no ${name}`).toContain(name)
      expect(fs.readFileSync(join(p.folder, "LICENSE"), "utf8"), `${p.name}'s LICENSE differs from the repository's`).toBe(license)
      const entries = p.manifest.files ?? []
      expect(entries.length, `${p.name} has no "files"`).toBeGreaterThan(0)
      for (const entry of entries) {
        expect(isAbsolute(entry) || normalize(entry).startsWith(".."), `${p.name}: "files" entry ${entry} is outside the package`).toBe(false)
        const prefix = normalize(entry).replace(/^\.\//, "").replace(/\/$/, "")
        expect(p.files.some((f) => f === prefix || f.startsWith(`${prefix}/`)), `${p.name}: "files" entry ${entry} packs nothing`).toBe(true)
      }
      const prefixes = entries.map((e) => normalize(e).replace(/^\.\//, "").replace(/\/$/, ""))
      const stray = p.files.filter((f) => !ALWAYS.includes(f) && !prefixes.some((e) => f === e || f.startsWith(`${e}/`)))
      expect(stray, `${p.name} packs files "files" does not name`).toEqual([])
      const tests = p.files.filter((f) => /(^|\/)(test|tests|__tests__|fixtures)\/|\.(test|spec)\.[cm]?[jt]s$/.test(f))
      expect(tests, `${p.name} packs tests`).toEqual([])
    }
  })

  it("each packs every `exports`, `main` and `bin` target", () => {
    for (const p of packed) {
      const targets = [...targetsOf(p.manifest.exports), ...targetsOf(p.manifest.main), ...binsOf(p.manifest.bin)]
      expect(targets.length, `${p.name} exports nothing`).toBeGreaterThan(0)
      for (const target of targets) expect(matches(p.files, target), `${p.name}: ${target} is not in the tarball`).toBe(true)
    }
  })

  it("each README has an install section: the npm install line, and the Node versions", () => {
    for (const p of packed) {
      const readme = fs.readFileSync(join(p.folder, "README.md"), "utf8")
      const install = /^## Install\n([\s\S]*?)(?=^## |$(?![\s\S]))/m.exec(readme)?.[1]
      expect(install, `${p.name}'s README has no "## Install" section`).toBeDefined()
      expect(install, `${p.name}: the install section does not install it`).toMatch(new RegExp(`npm install [^\\n]*${p.name.replace("/", "\\/")}`))
      expect(install, `${p.name}: the install section does not name the Node versions`).toMatch(/Node\.js 22 .*\b24\b/)
    }
  })

  it("peer ranges are real, `effect` is a peer (never a dependency) with the repository's one range, engines are the repository's", () => {
    const effect = rootManifest.devDependencies.effect
    expect(effect).toMatch(/^[~^]\d+\.\d+\.\d+$/)
    for (const p of packed) {
      const peers = p.manifest.peerDependencies ?? {}
      for (const [name, range] of Object.entries(peers)) expect(range, `${p.name}'s peer range on ${name}`).toMatch(/^[~^]?\d+\.\d+\.\d+$/)
      // The platform packages hold only an addon: no JavaScript, no peers.
      if (p.name !== "@tensorlane/core" && peers["@tensorlane/core"] === undefined) continue
      expect(peers.effect, `${p.name}'s peer on effect`).toBe(effect)
      expect(p.manifest.dependencies?.effect, `${p.name} depends on effect instead of taking it as a peer`).toBeUndefined()
      expect(p.manifest.engines?.node, `${p.name}'s engines`).toBe(rootManifest.engines?.node)
    }
  })
})
