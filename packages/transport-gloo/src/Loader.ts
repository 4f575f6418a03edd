/**
 * The addon, loaded on first use (core's nativeAddon), so that importing the transport never fails
 * on a machine without libgloo; a failure says which library is missing, where we looked and what
 * to run.
 */
import * as fs from "node:fs"
import { NativeLibraryError } from "@tensorlane/core"
import { nativePackage } from "@tensorlane/core/native"
import type { GlooAddon } from "./AddonTypes.js"

/** This package: what actor processes import to load the transport, and what builds the addon. */
export const PACKAGE = "@tensorlane/transport-gloo"

export const addon = nativePackage({ packageName: PACKAGE, moduleUrl: import.meta.url }).addon<GlooAddon>({
  buildNeeds: "libgloo-dev (sudo apt-get install libgloo-dev)",
  // dlopen names the shared object it could not find: a source build whose system libgloo went
  // away (the platform package bundles its own). Anything else is a broken or foreign build.
  explain: (failures, tried, fix) => {
    if (!failures.some((f) => f.includes("libgloo.so"))) return undefined
    const withLibrary = `sudo apt-get install libgloo0 for the addon built against the system's libgloo, or ${fix}`
    return new NativeLibraryError({
      message: `libgloo.so.0 (Gloo, Debian package libgloo0) cannot be loaded by the gloo addon: ${failures.join("; ")}. Tried: ${tried.join(", ")}. Fix: ${withLibrary}`,
      library: "libgloo.so.0",
      tried,
      fix: withLibrary,
    })
  },
})

/** The addon and the file it came from; NativeLibraryError when it cannot be loaded. */
export const loadGlooAddon = addon.load

/** The libgloo this process mapped (after the addon loaded), for diagnostics. */
export const mappedGlooLibrary = (): string | undefined => {
  try {
    const line = fs
      .readFileSync("/proc/self/maps", "utf8")
      .split("\n")
      .find((l) => /\/libgloo\.so/.test(l))
    return line?.slice(line.indexOf("/"))
  } catch {
    return undefined
  }
}
