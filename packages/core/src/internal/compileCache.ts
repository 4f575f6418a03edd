/**
 * Node's on-disk cache of compiled modules for the threads tensorlane starts (actor processes and
 * transfer agents): each loads the same modules at every start, and reading their bytecode back
 * instead of compiling it again takes 10 to 14% off a spawn on Node 24
 * (docs/decisions/actor-start.md). Node runs whatever bytecode the folder holds for a module whose
 * source matches, so it is used only where no other user could have written it.
 */
import * as fs from "node:fs"
import * as nodeModule from "node:module"
import { dirname, join } from "node:path"
import { tensorlaneCacheDir } from "../CacheDir.js"

/** Node's `module.enableCompileCache` (from Node 22.8) and `flushCompileCache` (22.10); `@types/node` 20 declares neither. */
type WithCompileCache = { readonly enableCompileCache?: (directory: string) => unknown; readonly flushCompileCache?: () => void }

/**
 * Whether `dir` (no symbolic link in it) and every folder above it belong to this user or root and
 * no one else may write in them, but for sticky folders above it such as /tmp (where others cannot
 * rename or delete what is not theirs).
 */
const ownedPrivately = (dir: string, uid: number): boolean => {
  for (let folder = dir; ; folder = dirname(folder)) {
    const stat = fs.lstatSync(folder)
    if (!stat.isDirectory() || (stat.uid !== uid && stat.uid !== 0)) return false
    if ((stat.mode & 0o022) !== 0 && (folder === dir || (stat.mode & 0o1000) === 0)) return false
    if (dirname(folder) === folder) return true
  }
}

/**
 * Turns the cache on for the modules this thread loads from now on, in
 * `$XDG_CACHE_HOME/tensorlane/compile-cache` (made 0700). Nothing happens before Node 22.8, where
 * `NODE_DISABLE_COMPILE_CACHE` is set (to anything) or a `NODE_COMPILE_CACHE` of the user's already
 * holds it, without `process.getuid`, or where the folder cannot be made or another user could write
 * in it: modules are then compiled as before, silently.
 */
export const enableCompileCache = (): void => {
  const enable = (nodeModule as WithCompileCache).enableCompileCache
  const uid = process.getuid?.()
  if (enable === undefined || uid === undefined) return
  if (process.env.NODE_DISABLE_COMPILE_CACHE !== undefined || (process.env.NODE_COMPILE_CACHE ?? "") !== "") return
  try {
    const dir = join(tensorlaneCacheDir(), "compile-cache")
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const real = fs.realpathSync(dir)
    if (ownedPrivately(real, uid)) enable(real)
  } catch {
    // A folder that cannot be made or read (a read-only home, a file in its path): no cache.
  }
}

/**
 * Writes what this thread compiled so far, once it is ready: Node would write it only as the thread
 * exits, which an actor killed, or an agent thread ended by its process's exit, never does.
 */
export const flushCompileCache = (): void => (nodeModule as WithCompileCache).flushCompileCache?.()
