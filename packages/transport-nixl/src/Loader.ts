/**
 * Finds and loads the native addon and NIXL's C API on first use, so that importing the transport
 * never fails on a machine without NIXL; a failure says what is missing, every place that was
 * tried, and what to run.
 *
 * libnixl_capi.so is searched in this order: $NIXL_LIB_DIR; the user cache, where
 * `npx tensorlane install nixl` unpacks the nixl-cu12 wheel; <repo>/.tools/libraries (where
 * tools/setup.sh unpacks it), looked for in every ancestor of this package and of the working
 * directory; Python's site-packages (a `pip install nixl-cu12` or nixl-cu13); then the system
 * library path (dlopen by bare name). NIXL_PLUGIN_DIR, when set, is read by libnixl itself; by
 * default it finds plugins/ next to it.
 */
import { type RuntimeWheel, libraryCandidates as candidatesOf, loadNativeLibrary, nativePackage } from "@tensorlane/core/native"
import type { NixlAddon } from "./AddonTypes.js"
import { nixlSettings } from "./internal/settings.js"

export const LIBRARY = "libnixl_capi.so"
export const PACKAGE = "@tensorlane/transport-nixl"

/**
 * The wheel of NIXL's libraries (built for CPython 3.11; the libraries are the same in every
 * build). Unpacked: the C API and what it links (NIXL's own libraries, gRPC and etcd's client, UCX
 * with rdma-core), the UCX plugin and UCX's open-source transport modules; not the other plugins,
 * nor the Python bindings, nor the three proprietary mlx5 modules (docs/decisions/runtime-libraries.md).
 */
const WHEEL: RuntimeWheel = {
  name: "nixl-cu12",
  version: "1.5.1",
  url: "https://files.pythonhosted.org/packages/02/86/07c679b00ff0ae890b1ddce1e05028d08828703d7a2d7578414b34de9553/nixl_cu12-1.5.1-cp311-cp311-manylinux_2_28_x86_64.whl",
  bytes: 68_631_568,
  sha256: "341d0dfa499f941c054614252f1d8047d1380e33f29c87707372ff5ec7d3779a",
  libraries: [
    /^\.nixl_cu12\.mesonpy\.libs\/lib(nixl|nixl_build|nixl_capi|nixl_common|serdes|stream)\.so$/,
    /^\.nixl_cu12\.mesonpy\.libs\/plugins\/libplugin_UCX\.so$/,
    /^nixl_cu12\.libs\/lib(absl_\w+|upb_\w+|utf8_range_lib|utf8_validity|address_sorting|etcd-cpp-api-core|gpr|grpc|grpc\+\+|ibverbs|mlx5|nl-3|nl-route-3|protobuf|re2|ucm|ucp|ucs|uct)-[0-9a-f]{8}\.so[.0-9]*$/,
    /^nixl_cu12\.libs\/ucx\/lib(ucm_cuda|uct_cma|uct_cuda|uct_ib|uct_ib_efa|uct_ib_mlx5)\.so\.0\.0\.0$/,
  ],
}

/** What `npx tensorlane install nixl` fetches. */
export const runtimeWheels: ReadonlyArray<RuntimeWheel> = [WHEEL]

const native = nativePackage({ packageName: PACKAGE, moduleUrl: import.meta.url })

const addon = native.addon<NixlAddon>()

export const librarySpec = native.library({
  library: LIBRARY,
  what: "NIXL's C API",
  wheel: WHEEL,
  folder: ".nixl_cu12.mesonpy.libs",
  override: { env: "NIXL_LIB_DIR", names: "folder" },
  siblings: [`.nixl_cu13.mesonpy.libs/${LIBRARY}`],
})

/** Candidate paths of libnixl_capi.so, in search order; the last entry is the bare name. */
export const libraryCandidates = (): ReadonlyArray<string> => candidatesOf(librarySpec)

let loaded: { readonly addon: NixlAddon; readonly library: string } | undefined

/**
 * The addon with NIXL's library loaded in this process (by this thread or another one: the
 * library and its agent are process-wide); NativeLibraryError when either cannot be loaded.
 */
export const loadNixl = (): { readonly addon: NixlAddon; readonly library: string } => {
  if (loaded !== undefined) return loaded
  const native = addon.load().addon
  const already = native.loadedLibrary()
  if (already !== undefined) return (loaded = { addon: native, library: already })
  const settings = nixlSettings()
  const { path } = loadNativeLibrary(librarySpec, (library) => native.load({ library, ...settings }))
  return (loaded = { addon: native, library: path })
}

/** The addon, if NIXL is already loaded in this process (by any thread); never loads anything. */
export const loadedNixl = (): NixlAddon | undefined => {
  if (loaded !== undefined) return loaded.addon
  let native: NixlAddon
  try {
    native = addon.load().addon
  } catch {
    return undefined
  }
  const library = native.loadedLibrary()
  if (library === undefined) return undefined
  loaded = { addon: native, library }
  return native
}
