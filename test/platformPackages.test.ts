/**
 * The prebuilt platform packages (packages/platforms/*, filled by the repository's build with
 * packages/core/native-kit/bundle-addon.sh): each holds the addon of the current build with RUNPATH
 * $ORIGIN/lib, and a process that loads it with LD_LIBRARY_PATH empty maps every library that is
 * not the C or C++ runtime from the package's own lib/ (gloo: libgloo, libhiredis, libibverbs,
 * libnl), whose licences THIRD_PARTY_LICENSES carries; the transport lists it as an exact-version
 * optional dependency, and npm packs exactly those files.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const packages = fileURLToPath(new URL("../packages/", import.meta.url))

/** What every glibc system has, and Node maps before any addon: never bundled. */
const RUNTIMES = /^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libresolv\.so\.2|libgcc_s\.so\.1|libstdc\+\+\.so\.6[.\d]*|ld-linux-x86-64\.so\.2)$/

const PLATFORMS = [
  { dir: "gloo-linux-x64-gnu", transport: "transport-gloo", file: "tensorlane_gloo.node", bundles: ["libgloo.so.0", "libhiredis.so.0.14", "libibverbs.so.1", "libnl-3.so.200", "libnl-route-3.so.200"] },
  { dir: "nixl-linux-x64-gnu", transport: "transport-nixl", file: "tensorlane_nixl.node", bundles: [] },
  { dir: "nccl-linux-x64-gnu", transport: "transport-nccl", file: "tensorlane_nccl.node", bundles: [] },
  { dir: "symmetric-mem-linux-x64-gnu", transport: "symmetric-mem", file: "tensorlane_symmetric.node", bundles: [] },
] as const

const manifestOf = (dir: string) =>
  JSON.parse(fs.readFileSync(join(dir, "package.json"), "utf8")) as {
    name: string
    version: string
    os: Array<string>
    cpu: Array<string>
    libc: Array<string>
    optionalDependencies?: Record<string, string>
  }

const buildId = (file: string): string | undefined => /Build ID: ([0-9a-f]+)/.exec(execFileSync("readelf", ["-n", file], { encoding: "utf8" }))?.[1]

const runpath = (file: string): string | undefined => /\(RUNPATH\)\s+Library runpath: \[([^\]]*)\]/.exec(execFileSync("readelf", ["-d", file], { encoding: "utf8" }))?.[1]

/** The shared objects a fresh Node process maps once it required `addon`, with LD_LIBRARY_PATH empty. */
const mappedWith = (addon: string): ReadonlyArray<string> => {
  const program = `require(${JSON.stringify(addon)})
    const paths = require("fs").readFileSync("/proc/self/maps", "utf8").split("\\n").map((l) => l.replace(/^[^/]*/, ""))
    console.log(JSON.stringify([...new Set(paths.filter((p) => /\\.so(\\.|$)/.test(p)))]))`
  const out = execFileSync(process.execPath, ["-e", program], { cwd: "/", env: { ...process.env, LD_LIBRARY_PATH: "" }, encoding: "utf8" })
  return JSON.parse(out) as ReadonlyArray<string>
}

describe.each(PLATFORMS)("the platform package $dir", ({ dir, transport, file, bundles }) => {
  const root = join(packages, "platforms", dir)
  const addon = join(root, file)

  it("is an exact-version optional dependency of its transport, for Linux on x64 with glibc", () => {
    const own = manifestOf(root)
    const parent = manifestOf(join(packages, transport))
    expect(own.name).toBe(`${parent.name}-linux-x64-gnu`)
    expect(parent.optionalDependencies).toEqual({ [own.name]: parent.version })
    expect(own.version).toBe(parent.version)
    expect({ os: own.os, cpu: own.cpu, libc: own.libc }).toEqual({ os: ["linux"], cpu: ["x64"], libc: ["glibc"] })
  })

  it("holds the addon of the current build, whose RUNPATH is $ORIGIN/lib", () => {
    // A stale copy would be loaded before the checkout's build: `npm run build` refreshes it.
    expect(buildId(addon)).toBe(buildId(join(packages, transport, "build", "Release", file)))
    expect(runpath(addon)).toBe("$ORIGIN/lib")
  })

  it("maps every library but the C and C++ runtimes from its own lib/, with LD_LIBRARY_PATH empty", () => {
    const bundled = fs.existsSync(join(root, "lib")) ? fs.readdirSync(join(root, "lib")).sort() : []
    expect(bundled).toEqual([...bundles].sort())
    for (const library of bundled) expect(runpath(join(root, "lib", library))).toBe("$ORIGIN")
    const mapped = mappedWith(addon)
    const foreign = mapped.filter((path) => !path.startsWith(join(root, "lib") + "/") && !RUNTIMES.test(basename(path)))
    expect(foreign).toEqual([])
    expect(mapped.filter((path) => path.startsWith(root)).map((path) => basename(path)).sort()).toEqual(bundled)
  })

  it("carries the licence of each bundled library and of node-addon-api, and packs exactly its files", () => {
    const licences = fs.readFileSync(join(root, "THIRD_PARTY_LICENSES"), "utf8")
    expect(licences).toMatch(/node-addon-api's headers:\n\nThe MIT License/)
    for (const library of bundles) expect(licences).toMatch(new RegExp(`^lib/${library.replaceAll(".", "\\.")}: Debian package \\S+ \\S+, /usr/share/doc/\\S+/copyright$`, "m"))
    const [pack] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" })) as Array<{ files: Array<{ path: string }> }>
    expect(pack.files.map((f) => f.path).sort()).toEqual(["THIRD_PARTY_LICENSES", file, ...bundles.map((l) => `lib/${l}`), "package.json"].sort())
  })
})
