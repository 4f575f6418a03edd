/**
 * Node's on-disk cache of compiled modules for the threads tensorlane starts (actor processes and
 * transfer agents): each loads the same modules at every start, and reading their bytecode back
 * instead of compiling it again is a sixth of an actor's spawn. It lives in the per-user cache,
 * beside the addons built from source, so it is as trusted as they are.
 */
import * as nodeModule from "node:module"
import { join } from "node:path"
import { tensorlaneCacheDir } from "../CacheDir.js"

/** Node's `module.enableCompileCache`, from Node 22.8; `@types/node` 20 does not declare it. */
type WithCompileCache = { readonly enableCompileCache?: (directory: string) => unknown }

/**
 * Turns the cache on for the modules this thread loads from now on. Before Node 22.8 there is none;
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off and a `NODE_COMPILE_CACHE` of the user's wins (Node
 * reads both itself); a directory that cannot be written leaves modules compiled as before, silently.
 */
export const enableCompileCache = (): void => {
  ;(nodeModule as WithCompileCache).enableCompileCache?.(join(tensorlaneCacheDir(), "compile-cache"))
}
