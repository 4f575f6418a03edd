/**
 * A native package's loading, stated once: its addon and the runtime libraries the addon dlopens,
 * with what follows from the package's name (the addon's name, the `npx tensorlane install`
 * target, a library's description, paths and system names) derived here, so that each package
 * states only what differs.
 */
import { join } from "node:path"
import { type AddonOptions, type NativeAddon, type NativeLibrarySpec, type RuntimeWheel, nativeAddon } from "./NativeAddon.js"

export interface NativePackageOptions {
  /** The npm package (its package.json `name`). */
  readonly packageName: string
  /** `import.meta.url` of a module of that package. */
  readonly moduleUrl: string
  /** The addon's name (file `tensorlane_<name>.node`, override TENSORLANE_<NAME>_ADDON); default: the package's short name. */
  readonly addon?: string
  /** The argument of `npx tensorlane install` that fetches its runtime libraries; default: the package's short name. */
  readonly install?: string
}

/** A runtime library in its pinned wheel, as the package states it. */
export interface RuntimeLibraryOptions {
  /** The library's file name (`libnccl.so.2`). */
  readonly library: string
  /**
   * What errors call it, followed by the file and the wheel: "NIXL's C API" reads "NIXL's C API
   * (libnixl_capi.so, from the nixl-cu12 1.5.1 wheel)"; undefined: the file name alone.
   */
  readonly what?: string
  readonly wheel: RuntimeWheel
  /** The folder inside the wheel (and inside Python's site-packages) that holds it. */
  readonly folder: string
  readonly override: NativeLibrarySpec["override"]
  /** Its paths in the wheels of sibling builds (cu13), looked for in site-packages after its own. */
  readonly siblings?: ReadonlyArray<string>
  /** More names dlopen looks up on the system library path, after the file name. */
  readonly systemNames?: ReadonlyArray<string>
}

export interface NativePackage {
  /** The package's addon, loaded on first use (what a source build needs and a finer diagnosis as nativeAddon takes them). */
  readonly addon: <A>(options?: Pick<AddonOptions, "buildNeeds" | "explain">) => NativeAddon<A>
  /** A runtime library the addon dlopens, for libraryCandidates and loadNativeLibrary. */
  readonly library: (options: RuntimeLibraryOptions) => NativeLibrarySpec
}

/** `@tensorlane/transport-gloo` -> `gloo`: the name without its scope and `transport-`. */
const shortNameOf = (packageName: string): string => packageName.replace(/^@[^/]+\//, "").replace(/^transport-/, "")

export const nativePackage = (options: NativePackageOptions): NativePackage => {
  const { packageName, moduleUrl } = options
  const shortName = shortNameOf(packageName)
  return {
    addon: (addon) => nativeAddon({ packageName, moduleUrl, name: options.addon ?? shortName, ...addon }),
    library: (library) => {
      const path = join(library.folder, library.library)
      return {
        library: library.library,
        ...(library.what !== undefined ? { description: `${library.what} (${library.library}, from the ${library.wheel.name} ${library.wheel.version} wheel)` } : {}),
        packageName,
        moduleUrl,
        override: library.override,
        install: options.install ?? shortName,
        wheel: library.wheel,
        path,
        sitePaths: [path, ...(library.siblings ?? [])],
        systemNames: [library.library, ...(library.systemNames ?? [])],
      }
    },
  }
}
