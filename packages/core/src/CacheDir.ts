/**
 * The per-user cache of tensorlane: addons built from source (`npx tensorlane build`) and the
 * run-time libraries unpacked from wheels (`npx tensorlane install`), outside any node_modules so
 * that a reinstall keeps them.
 */
import * as os from "node:os"
import { isAbsolute, join } from "node:path"

/** `${XDG_CACHE_HOME:-$HOME/.cache}/tensorlane`; a relative XDG_CACHE_HOME is ignored, as the XDG base directory specification says. */
export const tensorlaneCacheDir = (): string => {
  const xdg = process.env.XDG_CACHE_HOME
  return join(xdg !== undefined && isAbsolute(xdg) ? xdg : join(os.homedir(), ".cache"), "tensorlane")
}
